/* treegrpo run explorer: the page's own script. The hard parts are the inlined libraries:
   d3 (tree layout, zoom), highlight.js (Python colouring), jsdiff (diff vs parent), Chart.js (curves).
   Data: the JSON element #treegrpo-data (treegrpo/report/_explorer.py says what is in it). */
(() => {
  "use strict";
  const D = JSON.parse(document.getElementById("treegrpo-data").textContent);
  const T = D.texts;
  const $ = (id) => document.getElementById(id);
  const COLORS = { ok: "#2e7d32", crashed: "#c62828", timeout: "#ef6c00", no_code: "#9e9e9e",
    no_submission: "#8d6e63", invalid_submission: "#6a1b9a" };
  const SHAPES = { draft: d3.symbolCircle, improve: d3.symbolSquare, debug: d3.symbolTriangle };
  const color = (s) => COLORS[s] || "#455a64";
  const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const num = (x, d = 4) => (x == null ? "–" : String(+x.toPrecision(d)));
  const push = (m, k, v) => (m.get(k) || m.set(k, []).get(k)).push(v);
  const key = (task, round) => task + "\u0000" + round;

  // ---- the runs: rows -> node objects, indexed by id, parent, sibling group and round
  const runs = D.runs.map((r) => {
    const nodes = r.nodes.map((row) => Object.fromEntries([["run", r.id], ...D.fields.map((f, i) => [f, row[i]])]));
    const run = { ...r, nodes, byId: new Map(nodes.map((n) => [n.id, n])), kids: new Map(), groups: new Map(), byRound: new Map() };
    for (const n of nodes) {
      if (n.parent && run.byId.has(n.parent)) push(run.kids, n.parent, n);
      push(run.groups, n.group, n);
      push(run.byRound, key(n.task, n.round), n);
    }
    run.info = new Map(r.rounds.map((x) => [key(x.task, x.round), x]));
    return run;
  });
  const runOf = new Map(runs.map((r) => [r.id, r]));
  const all = runs.flatMap((r) => r.nodes);
  const STATUSES = [...new Set([...Object.keys(COLORS), ...all.map((n) => n.status)])].filter((s) => all.some((n) => n.status === s));
  const MODES = [...new Set(all.map((n) => n.mode))];
  const on = { status: new Set(STATUSES), mode: new Set(MODES) };
  const S = { run: runs[0], task: null, round: null, node: null };

  // ---- controls: run / task / round, and status / mode filters
  function options(sel, items, value) {
    sel.innerHTML = items.map(([v, label]) => `<option value="${esc(v)}">${esc(label)}</option>`).join("");
    sel.value = String(value);
  }
  function roundsOf(run, task) {
    return [...run.info.values()].filter((x) => x.task === task && run.byRound.has(key(task, x.round)));
  }
  function defaultRound(run, task) {
    const rs = roundsOf(run, task);
    const done = rs.filter((x) => x.summary);
    return (done.length ? done : rs).at(-1)?.round ?? null;
  }
  function show(run, task, round) {
    S.run = run; S.task = task ?? run.tasks.find((t) => defaultRound(run, t) != null) ?? run.tasks[0];
    S.round = round ?? defaultRound(run, S.task);
    options($("sel-run"), runs.map((r) => [r.id, r.role === "run" ? r.id : `${r.id} (${r.role})`]), run.id);
    options($("sel-task"), run.tasks.map((t) => [t, t]), S.task);
    options($("sel-round"), roundsOf(run, S.task).map((x) => [x.round, `round ${x.round} · ${x.nodes} nodes, ${x.valid} valid`]), S.round);
    drawTree();
  }
  $("sel-run").onchange = (e) => show(runOf.get(e.target.value));
  $("sel-task").onchange = (e) => show(S.run, e.target.value);
  $("sel-round").onchange = (e) => show(S.run, S.task, +e.target.value);
  for (const [what, values] of [["status", STATUSES], ["mode", MODES]]) {
    $("f-" + what).insertAdjacentHTML("beforeend", values.map((v) => `<label><input type="checkbox" checked data-what="${what}" value="${esc(v)}">${esc(v)}</label>`).join(""));
  }
  document.querySelectorAll("#controls input").forEach((box) => (box.onchange = () => {
    on[box.dataset.what][box.checked ? "add" : "delete"](box.value);
    filter();
  }));
  const shown = (n) => on.status.has(n.status) && on.mode.has(n.mode);
  function filter() {
    d3.selectAll("#tree .node").classed("off", (n) => !shown(n));
    d3.selectAll("#node-list tr[data-id]").classed("off", function () { return !shown(S.run.byId.get(this.dataset.id)); });
    const nodes = S.run.byRound.get(key(S.task, S.round)) || [];
    const info = S.run.info.get(key(S.task, S.round)) || {};
    $("round-info").innerHTML = `<b>${esc(S.run.id)}</b> · ${esc(S.task)} · round ${S.round} — ${nodes.length} nodes,
      ${nodes.filter((n) => n.status === "ok").length} valid, crash share ${num(info.crash_rate, 3)}, best test metric
      ${num(info.best_test_metric, 5)} · showing ${nodes.filter(shown).length}`;
  }
  $("legend").innerHTML = STATUSES.map((s) => `<span><i style="background:${color(s)}"></i>${esc(s)}</span>`).join("")
    + "<span>● draft ■ improve ▲ debug</span><span style='color:#f9a825'>◯ best valid node of the round</span>";

  // ---- the tree: d3.tree over sibling groups (a group = a box of its members in rows of <= 8)
  const CW = 32, CH = 34;
  const svg = d3.select("#tree");
  const zoom = d3.zoom().scaleExtent([0.05, 6]).on("zoom", (e) => {
    svg.select("g").attr("transform", e.transform);
    svg.classed("far", e.transform.k < 0.75);
  });
  svg.call(zoom);
  function layout(nodes) {
    const groups = d3.groups(nodes, (n) => n.group).map(([id, ms]) => ({ id, ms, children: [] }));
    const C = Math.min(8, d3.max(groups, (g) => g.ms.length) || 1);
    const R = Math.ceil((d3.max(groups, (g) => g.ms.length) || 1) / C);
    const groupOf = new Map(nodes.map((n) => [n.id, n.group]));
    const byId = new Map(groups.map((g) => [g.id, g]));
    const root = { id: "", ms: [], children: [] };
    for (const g of groups) (byId.get(groupOf.get(g.ms[0].parent)) || root).children.push(g);
    const h = d3.tree().nodeSize([C * CW + 36, R * CH + 56])(d3.hierarchy(root));
    const pos = new Map();
    for (const b of h.descendants()) {
      b.data.ms.forEach((n, i) => pos.set(n.id, [b.x - (C * CW) / 2 + ((i % C) + 0.5) * CW, b.y + (Math.floor(i / C) + 0.5) * CH]));
      b.w = C * CW; b.hgt = Math.ceil(b.data.ms.length / C) * CH;
    }
    return { boxes: h.descendants().filter((b) => b.data.ms.length), pos };
  }
  function drawTree() {
    const nodes = S.run.byRound.get(key(S.task, S.round)) || [];
    const best = S.run.info.get(key(S.task, S.round))?.best_id;
    const { boxes, pos } = layout(nodes);
    svg.selectAll("g").remove();
    const g = svg.append("g");
    g.append("g").selectAll("rect").data(boxes).join("rect").attr("class", "grp").attr("data-group", (b) => b.data.id)
      .attr("x", (b) => b.x - b.w / 2 - 4).attr("y", (b) => b.y - 2).attr("width", (b) => b.w + 8).attr("height", (b) => b.hgt + 4)
      .append("title").text((b) => `sibling group ${b.data.id} · step ${b.data.ms[0].step} · ${b.data.ms.length} nodes`);
    const link = d3.linkVertical();
    g.append("g").selectAll("path").data(boxes.filter((b) => pos.has(b.data.ms[0].parent))).join("path").attr("class", "edge")
      .attr("d", (b) => link({ source: pos.get(b.data.ms[0].parent), target: [b.x, b.y - 2] }));
    const sel = g.append("g").selectAll("g").data(nodes).join("g")
      .attr("class", (n) => "node" + (n.id === best ? " best" : ""))
      .attr("data-id", (n) => n.id).attr("data-status", (n) => n.status).attr("data-mode", (n) => n.mode)
      .attr("transform", (n) => `translate(${pos.get(n.id)})`).on("click", (e, n) => select(n));
    sel.append("path").attr("d", (n) => d3.symbol(SHAPES[n.mode] || d3.symbolDiamond, 100)()).attr("fill", (n) => color(n.status));
    sel.append("text").attr("y", 16).text((n) => (n.oriented == null ? "" : num(n.oriented, 3)));
    sel.append("title").text((n) => `${n.id} · ${n.mode} · ${n.status}${n.exc ? " (" + n.exc + ")" : ""} · oriented ${num(n.oriented)} · reward ${num(n.reward)}`);
    fit(boxes);
    $("node-list").innerHTML = "<tr><th>node</th><th>step</th><th>mode</th><th>status</th><th>oriented</th><th>reward</th><th>advantage</th></tr>"
      + nodes.map((n) => `<tr data-id="${esc(n.id)}"><td><code>${esc(n.id)}</code></td><td>${n.step}</td><td>${esc(n.mode)}</td>
      <td>${esc(n.status)}</td><td>${num(n.oriented)}</td><td>${num(n.reward)}</td><td>${num(n.adv, 3)}</td></tr>`).join("");
    filter();
    mark();
  }
  function fit(boxes) {
    if (!boxes.length) return;
    const x0 = d3.min(boxes, (b) => b.x - b.w / 2), x1 = d3.max(boxes, (b) => b.x + b.w / 2);
    const y0 = d3.min(boxes, (b) => b.y), y1 = d3.max(boxes, (b) => b.y + b.hgt);
    const el = svg.node(), W = el.clientWidth || 800, H = el.clientHeight || 500;
    const k = Math.max(0.3, Math.min(1.5, (W - 20) / (x1 - x0), (H - 20) / (y1 - y0)));
    const tx = (x1 - x0) * k < W ? W / 2 - (k * (x0 + x1)) / 2 : 10 - k * x0;
    svg.call(zoom.transform, d3.zoomIdentity.translate(tx, 10 - k * y0).scale(k));
  }
  function mark() {
    const n = S.node;
    d3.selectAll("#tree .node").classed("selected", (m) => m === n);
    d3.selectAll("#tree .grp").classed("sel", (b) => !!n && b.data.id === n.group);
    d3.selectAll("#node-list tr[data-id]").classed("cur", function () { return !!n && this.dataset.id === n.id; });
  }
  $("node-list").onclick = (e) => { const tr = e.target.closest("tr[data-id]"); if (tr) select(S.run.byId.get(tr.dataset.id)); };

  // ---- a node's page
  const link = (m) => `<a href="#" data-run="${esc(m.run)}" data-node="${esc(m.id)}">${esc(m.id)}</a>`;
  function gateText(gt) {
    if (!gt) return null;
    const res = gt.resources ? Object.entries(gt.resources).map(([k, v]) => `${k} ${v}`).join(", ") : "none";
    const decision = gt.malformed ? `malformed: ${gt.miss}` : gt.miss ? `rejected: ${gt.miss}` : gt.resources ? "declaration used" : "no declaration: defaults";
    const t = gt.timings ? " · " + Object.entries(gt.timings).map(([k, v]) => `${k} ${num(v, 3)} s`).join(", ") : "";
    return [res, `${decision} · ran on ${gt.where || "–"}${t}${gt.gpu_util != null ? ` · GPU util ${gt.gpu_util} %` : ""}${gt.deps_ignored ? " · dependencies ignored" : ""}`];
  }
  function diffHtml(a, b) {
    const hunks = Diff.structuredPatch("parent", "node", a, b, "", "", { context: 3 }).hunks;
    if (!hunks.length) return `<p class="hint">identical to the parent's code</p>`;
    const cls = { "+": "add", "-": "del" };
    const body = hunks.map((h) => `<span class="hunk">@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@</span>`
      + h.lines.map((l) => `<span class="${cls[l[0]] || "ctx"}">${esc(l) || " "}</span>`).join("\n")).join("\n");
    return `<pre class="diff">${body}</pre>`;
  }
  function panel(n) {
    const r = runOf.get(n.run), parent = r.byId.get(n.parent), kids = r.kids.get(n.id) || [], sibs = r.groups.get(n.group) || [];
    const gate = gateText(n.gate);
    const facts = [
      ["run", `${esc(r.id)} (${esc(r.role)})`], ["task · round · step", `${esc(n.task)} · ${n.round} · ${n.step}`],
      ["sibling group", `<code>${esc(n.group)}</code> (${sibs.length} nodes)`], ["exception", esc(n.exc) || "–"],
      ["grade error", esc(n.grade_error) || "–"], ["exec time", `${num(n.exec_time)} s`], ["test metric", num(n.metric, 6)],
      ["oriented", num(n.oriented, 6)], ["reward", num(n.reward, 6)], [`advantage (${esc(D.estimator)})`, num(n.adv, 4)],
      ["policy version", `${n.version ?? "–"} <span class="hint">(${esc(r.versions)})</span>`],
      ["tokens", n.tokens], ["mean log-prob", num(n.logprob, 4)],
      ...(gate ? [["resources", esc(gate[0])], ["gate decision", esc(gate[1])]] : []),
      ["parent", parent ? link(parent) : n.parent ? `${esc(n.parent)} (not in this run)` : "– (draft)"],
      ["children", kids.map(link).join(" ") || "–"],
    ];
    const sibRows = sibs.map((m) => `<tr class="${m === n ? "cur" : ""}"><td>${link(m)}</td><td>${esc(m.mode)}</td><td>${esc(m.status)}</td>
      <td>${num(m.reward)}</td><td>${num(m.adv, 3)}</td></tr>`).join("");
    $("node-pane").innerHTML = `<h2>node <code>${esc(n.id)}</code> <span class="badge" style="background:${color(n.status)}">${esc(n.status)}</span> ${esc(n.mode)}</h2>
      <dl class="facts">${facts.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join("")}</dl>
      <h3>the group's advantages (${esc(D.estimator)}, from the rewards)</h3>
      <table class="sibs"><tr><th>sibling</th><th>mode</th><th>status</th><th>reward</th><th>advantage</th></tr>${sibRows}</table>
      <h3>plan</h3><pre class="plan">${esc(T[n.plan]) || "(empty)"}</pre>
      <h3>code</h3><pre class="code"><code class="hljs">${hljs.highlight(T[n.code], { language: "python", ignoreIllegals: true }).value}</code></pre>
      <h3>diff against the parent</h3>${parent ? diffHtml(T[parent.code], T[n.code]) : `<p class="hint">a draft: no parent</p>`}
      <h3>output tail (term_tail)</h3><pre class="tail">${esc(T[n.tail]) || "(empty)"}</pre>`;
    $("node-pane").scrollTop = 0;
  }
  function select(n) {
    if (!n) return;
    if (runOf.get(n.run) !== S.run || n.task !== S.task || n.round !== S.round) show(runOf.get(n.run), n.task, n.round);
    S.node = n;
    mark();
    panel(n);
    try { history.replaceState(null, "", "#" + new URLSearchParams({ run: n.run, node: n.id })); } catch (e) { /* file: URLs in some browsers */ }
  }
  $("node-pane").onclick = (e) => {
    const a = e.target.closest("a[data-node]");
    if (a) { e.preventDefault(); select(runOf.get(a.dataset.run).byId.get(a.dataset.node)); }
  };

  // ---- verdict and curves
  if (D.comparison) {
    const v = $("verdict");
    v.hidden = false; v.className = D.comparison.verdict.replace(" ", "-");
    v.textContent = `${D.comparison.line}  —  train ${D.comparison.train_run} vs control ${D.comparison.control_run}, rounds ${D.comparison.late_rounds.join(", ")}`;
  }
  $("runs-line").textContent = runs.map((r) => `${r.id}${r.role === "run" ? "" : " (" + r.role + ")"}: ${r.nodes.length} nodes`).join(" · ");
  const PALETTE = d3.schemeTableau10;
  function series(label, pts, i) {
    const c = PALETTE[i % PALETTE.length];
    const line = { label, data: pts.map((p) => ({ x: p.x, y: p.y })), borderColor: c, backgroundColor: c, pointRadius: 3 };
    if (!pts.some((p) => p.lo != null)) return [line];
    const band = (k, fill) => ({ band: true, label: label + " " + k, data: pts.map((p) => ({ x: p.x, y: p[k] })), borderWidth: 0, pointRadius: 0, fill, backgroundColor: c + "33" });
    return [line, band("lo", false), band("hi", "-1")];
  }
  function chart(title, xlabel, datasets) {
    if (!datasets.some((d) => d.data.some((p) => p.y != null))) return;
    const fig = document.createElement("figure");
    fig.innerHTML = "<canvas></canvas>";
    $("charts").append(fig);
    new Chart(fig.firstChild, { type: "line", data: { datasets }, options: { animation: false, maintainAspectRatio: false, parsing: false,
      scales: { x: { type: "linear", title: { display: true, text: xlabel }, ticks: { stepSize: 1 } } },
      plugins: { title: { display: true, text: title }, legend: { labels: { filter: (it, d) => !d.datasets[it.datasetIndex].band } } } } });
  }
  const rows = (run, axis, task) => ((D.curves[run] || {})["by_" + axis] || []).filter((r) => r.task === task);
  const pts = (rs, axis, m) => rs.map((r) => ({ x: r[axis], y: r[m], lo: r[m + "_ci95"]?.[0], hi: r[m + "_ci95"]?.[1] }));
  const perTask = (f) => runs.flatMap((r) => r.tasks.map((t) => [r, t])).flatMap(([r, t], i) => f(r, t, i));
  function charts() {
    chart("Crash share by round", "round", perTask((r, t, i) => series(`${r.id} · ${t}`, r.rounds.filter((x) => x.task === t).map((x) => ({ x: x.round, y: x.crash_rate })), i)));
    chart("Best test metric by round (raw)", "round", perTask((r, t, i) => series(`${r.id} · ${t}`, r.rounds.filter((x) => x.task === t).map((x) => ({ x: x.round, y: x.best_test_metric })), i)));
    const vs = D.comparison ? " — train vs control" : "";
    chart("Sample score by round (pooled)" + vs, "round", runs.flatMap((r, i) => series(r.id, pts(rows(r.id, "round", "pooled"), "round", "score"), i)));
    chart("Failed share by round (pooled)" + vs, "round", runs.flatMap((r, i) => series(r.id, pts(rows(r.id, "round", "pooled"), "round", "failed_share"), i)));
    chart("Sample score by policy version (pooled)", "policy version", runs.flatMap((r, i) => series(r.id, pts(rows(r.id, "version", "pooled"), "version", "score"), i)));
    chart("Mean oriented metric of valid nodes by round", "round", perTask((r, t, i) => series(`${r.id} · ${t}`, pts(rows(r.id, "round", t), "round", "mean_oriented"), i)));
  }

  // ---- start: the node or round the address names, else the first run's last complete round
  const want = new URLSearchParams(location.hash.slice(1));
  const start = runOf.get(want.get("run"))?.byId.get(want.get("node"));
  show(runOf.get(want.get("run")) || runs[0]);
  if (start) select(start);
  charts();
  window.treegrpoReady = performance.now();
  document.documentElement.dataset.ready = "1";
})();
