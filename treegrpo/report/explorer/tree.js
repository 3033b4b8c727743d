/* treegrpo run explorer, 4/4: the controls (run, task, round; status and mode filters), the round's
   tree (d3.tree over sibling groups, pan/zoom), selection, and start-up. */
(() => {
  "use strict";
  const tg = window.treegrpo;
  const { runs, runOf, key, $, color, esc, num } = tg;
  const all = runs.flatMap((r) => r.nodes);
  const seen = (s) => all.some((n) => n.status === s);
  const STATUSES = [...new Set([...Object.keys(tg.COLORS), ...all.map((n) => n.status)])].filter(seen);
  const MODES = [...new Set(all.map((n) => n.mode))];
  const SHAPES = { draft: d3.symbolCircle, improve: d3.symbolSquare, debug: d3.symbolTriangle };
  const on = { status: new Set(STATUSES), mode: new Set(MODES) };
  const S = { run: runs[0], task: null, round: null, node: null };
  const here = () => S.run.byRound.get(key(S.task, S.round)) || [];

  // ---- controls
  function options(sel, items, value) {
    sel.innerHTML = items.map(([v, label]) => `<option value="${esc(v)}">${esc(label)}</option>`).join("");
    sel.value = String(value);
  }
  const roundsOf = (run, task) =>
    [...run.info.values()].filter((x) => x.task === task && run.byRound.has(key(task, x.round)));
  function lastRound(run, task) {
    const rs = roundsOf(run, task);
    const done = rs.filter((x) => x.summary);
    return (done.length ? done : rs).at(-1)?.round ?? null;
  }
  function show(run, task, round) {
    S.run = run;
    S.task = task ?? run.tasks.find((t) => lastRound(run, t) != null) ?? run.tasks[0];
    S.round = round ?? lastRound(run, S.task);
    const label = (x) =>
      `round ${x.round} · ${x.nodes} nodes, ${x.valid} valid` + (x.respent ? `, ${x.respent} re-spent` : "");
    options(
      $("sel-run"),
      runs.map((r) => [r.id, r.role === "run" ? r.id : `${r.id} (${r.role})`]),
      run.id,
    );
    options(
      $("sel-task"),
      run.tasks.map((t) => [t, t]),
      S.task,
    );
    options(
      $("sel-round"),
      roundsOf(run, S.task).map((x) => [x.round, label(x)]),
      S.round,
    );
    drawTree();
  }
  $("sel-run").onchange = (e) => show(runOf.get(e.target.value));
  $("sel-task").onchange = (e) => show(S.run, e.target.value);
  $("sel-round").onchange = (e) => show(S.run, S.task, +e.target.value);
  for (const [what, values] of Object.entries({ status: STATUSES, mode: MODES })) {
    const box = (v) => `<label><input type="checkbox" checked data-what="${what}" value="${esc(v)}">${esc(v)}</label>`;
    $("f-" + what).insertAdjacentHTML("beforeend", values.map(box).join(""));
  }
  for (const box of document.querySelectorAll("#controls input")) {
    box.onchange = () => {
      on[box.dataset.what][box.checked ? "add" : "delete"](box.value);
      filter();
    };
  }
  const shown = (n) => on.status.has(n.status) && on.mode.has(n.mode);
  const retried = (nodes) => nodes.filter((n) => (S.run.retried || {})[n.id]).length;
  function filter() {
    d3.selectAll("#tree .node").classed("off", (n) => !shown(n));
    d3.selectAll("#node-list tr[data-id]").classed("off", (n) => !shown(n));
    const nodes = here();
    const info = S.run.info.get(key(S.task, S.round)) || {};
    $("round-info").innerHTML =
      `<b>${esc(S.run.id)}</b> · ${esc(S.task)} · round ${S.round} — ${nodes.length} nodes, ` +
      `${nodes.filter((n) => n.status === "ok").length} valid, crash share ${num(info.crash_rate, 3)}, ` +
      `best test metric ${num(info.best_test_metric, 5)}` +
      (info.respent ? ` · ${info.respent} zero-variance group(s) re-spent` : "") +
      (retried(nodes) ? ` · ${retried(nodes)} retried after infrastructure faults` : "") +
      ` · showing ${nodes.filter(shown).length}`;
  }
  $("legend").innerHTML =
    STATUSES.map((s) => `<span><i style="background:${color(s)}"></i>${esc(s)}</span>`).join("") +
    "<span>● draft ■ improve ▲ debug</span><span class='best'>◯ best valid node of the round</span>";

  // ---- the tree: one box per sibling group (its members in rows of <= 8), boxes laid out by d3.tree
  const CW = 32; // cell width and height of one node in a box
  const CH = 34;
  const svg = d3.select("#tree");
  const zoom = d3.zoom().scaleExtent([0.05, 6]);
  zoom.on("zoom", (e) => {
    svg.select("g").attr("transform", e.transform);
    svg.classed("far", e.transform.k < 0.75); // labels only when they can be read
  });
  svg.call(zoom);

  function layout(nodes) {
    const groups = d3.groups(nodes, (n) => n.group).map(([id, ms]) => ({ id, ms, children: [] }));
    const G = d3.max(groups, (g) => g.ms.length) || 1;
    const C = Math.min(8, G);
    const byId = new Map(groups.map((g) => [g.id, g]));
    const groupOf = new Map(nodes.map((n) => [n.id, n.group]));
    const root = { id: "", ms: [], children: [] };
    for (const g of groups) (byId.get(groupOf.get(g.ms[0].parent)) || root).children.push(g);
    const h = d3.tree().nodeSize([C * CW + 36, Math.ceil(G / C) * CH + 56])(d3.hierarchy(root));
    const pos = new Map();
    const boxes = h.descendants().filter((b) => b.data.ms.length);
    for (const b of boxes) {
      Object.assign(b, { w: C * CW, hgt: Math.ceil(b.data.ms.length / C) * CH });
      const cell = (i) => [b.x - b.w / 2 + ((i % C) + 0.5) * CW, b.y + (Math.floor(i / C) + 0.5) * CH];
      b.data.ms.forEach((n, i) => pos.set(n.id, cell(i)));
    }
    return { boxes, pos };
  }

  function drawTree() {
    const nodes = here();
    const best = S.run.info.get(key(S.task, S.round))?.best_id;
    const { boxes, pos } = layout(nodes);
    svg.selectAll("g").remove();
    const g = svg.append("g");
    const rect = g.append("g").selectAll("rect").data(boxes).join("rect").attr("class", "grp");
    rect.attr("x", (b) => b.x - b.w / 2 - 4).attr("y", (b) => b.y - 2);
    rect.attr("width", (b) => b.w + 8).attr("height", (b) => b.hgt + 4);
    rect
      .append("title")
      .text((b) => `sibling group ${b.data.id} · step ${b.data.ms[0].step} · ${b.data.ms.length} nodes`);
    const link = d3.linkVertical();
    const linked = boxes.filter((b) => pos.has(b.data.ms[0].parent));
    const edge = (b) => link({ source: pos.get(b.data.ms[0].parent), target: [b.x, b.y - 2] });
    g.append("g").selectAll("path").data(linked).join("path").attr("class", "edge").attr("d", edge);
    const sel = g.append("g").selectAll("g").data(nodes).join("g");
    sel.attr("class", (n) => "node" + (n.id === best ? " best" : "")).attr("data-id", (n) => n.id);
    sel.attr("data-status", (n) => n.status).attr("data-mode", (n) => n.mode);
    sel.attr("transform", (n) => `translate(${pos.get(n.id)})`).on("click", (e, n) => select(n));
    sel.append("circle").attr("class", "hit").attr("r", 14); // the whole cell clicks, not just the symbol
    const shape = (n) => d3.symbol(SHAPES[n.mode] || d3.symbolDiamond, 100)();
    sel
      .append("path")
      .attr("d", shape)
      .attr("fill", (n) => color(n.status));
    sel
      .append("text")
      .attr("y", 16)
      .text((n) => (n.oriented == null ? "" : num(n.oriented, 3)));
    const exc = (n) => (n.exc ? ` (${n.exc})` : "");
    sel.append("title").text((n) => `${n.id} · ${n.mode} · ${n.status}${exc(n)} · reward ${num(n.reward)}`);
    fit(boxes);
    table(nodes);
    filter();
    mark();
  }

  function table(nodes) {
    const head = ["node", "step", "mode", "status", "oriented", "reward", "advantage"];
    const cells = (n) => [
      `<code>${esc(n.id)}</code>`,
      n.step,
      esc(n.mode),
      esc(n.status),
      num(n.oriented),
      num(n.reward),
      num(n.adv, 3),
    ];
    const tbody = d3.select("#node-list").html(`<tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>`);
    const tr = tbody
      .selectAll("tr.row")
      .data(nodes)
      .join("tr")
      .attr("class", "row")
      .attr("data-id", (n) => n.id);
    tr.html((n) =>
      cells(n)
        .map((c) => `<td>${c}</td>`)
        .join(""),
    ).on("click", (e, n) => select(n));
  }

  function fit(boxes) {
    if (!boxes.length) return;
    const [x0, x1] = [d3.min(boxes, (b) => b.x - b.w / 2), d3.max(boxes, (b) => b.x + b.w / 2)];
    const [y0, y1] = [d3.min(boxes, (b) => b.y), d3.max(boxes, (b) => b.y + b.hgt)];
    const el = svg.node();
    // a shallow round gets a short frame, a deep one at most 62 % of the window
    el.style.height = Math.round(Math.max(220, Math.min(0.62 * innerHeight, 1.3 * (y1 - y0) + 40))) + "px";
    const [W, H] = [el.clientWidth || 800, el.clientHeight || 500];
    const k = Math.max(0.3, Math.min(1.3, (W - 20) / (x1 - x0), (H - 20) / (y1 - y0)));
    const tx = (x1 - x0) * k < W ? W / 2 - (k * (x0 + x1)) / 2 : 10 - k * x0;
    svg.call(zoom.transform, d3.zoomIdentity.translate(tx, 10 - k * y0).scale(k));
  }

  function mark() {
    const n = S.node;
    d3.selectAll("#tree .node").classed("selected", (m) => m === n);
    d3.selectAll("#tree .grp").classed("sel", (b) => !!n && b.data.id === n.group);
    d3.selectAll("#node-list tr[data-id]").classed("cur", (m) => m === n);
  }

  function select(n) {
    if (!n) return;
    if (runOf.get(n.run) !== S.run || n.task !== S.task || n.round !== S.round) show(runOf.get(n.run), n.task, n.round);
    S.node = n;
    mark();
    tg.panel(n);
    try {
      history.replaceState(null, "", "#" + new URLSearchParams({ run: n.run, node: n.id }));
    } catch (e) {
      // some browsers refuse history changes on file: URLs; the page works without
    }
  }
  $("node-pane").onclick = (e) => {
    const a = e.target.closest("a[data-node]");
    if (!a) return;
    e.preventDefault();
    select(runOf.get(a.dataset.run).byId.get(a.dataset.node));
  };

  // ---- start: the node the address names, else the first run's last complete round
  const want = new URLSearchParams(location.hash.slice(1));
  tg.header();
  if (runs.length) show(runOf.get(want.get("run")) || runs[0]);
  else $("round-info").textContent = "These runs have no nodes.";
  select(runOf.get(want.get("run"))?.byId.get(want.get("node")));
  tg.charts();
  // ready once the first frame with the tree and charts has been painted (a frame after this one)
  requestAnimationFrame(() =>
    requestAnimationFrame(() => {
      window.treegrpoReady = performance.now();
      document.documentElement.dataset.ready = "1";
    }),
  );
})();
