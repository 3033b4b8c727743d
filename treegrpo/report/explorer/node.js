/* treegrpo run explorer, 2/4: a node's page — plan, code (highlight.js), diff against the parent
   (jsdiff, computed when the node is opened), output tail, numbers, gate, links. */
(() => {
  "use strict";
  const { D, T, runOf, $, color, esc, num } = window.treegrpo;
  const link = (m) => `<a href="#" data-run="${esc(m.run)}" data-node="${esc(m.id)}">${esc(m.id)}</a>`;

  function gate(g) {
    const res = g.resources ? Object.entries(g.resources).map(([k, v]) => `${k} ${v}`) : ["none"];
    let decision = g.resources ? "declaration used" : "no declaration: defaults";
    if (g.miss) decision = `${g.malformed ? "malformed" : "rejected"}: ${g.miss}`;
    const extra = [
      `ran on ${g.where || "–"}`,
      ...Object.entries(g.timings || {}).map(([k, v]) => `${k} ${num(v, 3)} s`),
      ...(g.gpu_util != null ? [`GPU util ${g.gpu_util} %`] : []),
      ...(g.deps_ignored ? ["dependencies ignored"] : []),
    ];
    return [
      ["resources", esc(res.join(", "))],
      ["gate decision", esc([decision, ...extra].join(" · "))],
    ];
  }

  function diffHtml(a, b) {
    const hunks = Diff.structuredPatch("parent", "node", a, b, "", "", { context: 3 }).hunks;
    if (!hunks.length) return `<p class="hint">identical to the parent's code</p>`;
    const cls = { "+": "add", "-": "del" };
    const line = (l) => `<span class="${cls[l[0]] || "ctx"}">${esc(l)}</span>`;
    const hunk = (h) =>
      `<span class="hunk">@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@</span>` +
      h.lines.map(line).join("");
    return `<pre class="diff">${hunks.map(hunk).join("")}</pre>`;
  }

  function facts(n, r, parent) {
    const kids = r.kids.get(n.id) || [];
    const orphan = n.parent ? `${esc(n.parent)} (not in this run)` : "– (draft)";
    return [
      ["run", `${esc(r.id)} (${esc(r.role)})`],
      ["task · round · step", `${esc(n.task)} · ${n.round} · ${n.step}`],
      ["sibling group", `<code>${esc(n.group)}</code> (${(r.groups.get(n.group) || []).length} nodes)`],
      ["exception", esc(n.exc) || "–"],
      ["grade error", esc(n.grade_error) || "–"],
      ["exec time", `${num(n.exec_time)} s`],
      ...(r.retried && r.retried[n.id]
        ? [["attempt", `${r.retried[n.id]} (run again after an infrastructure fault: --retry-masked)`]]
        : []),
      ["test metric", num(n.metric, 6)],
      ["oriented", num(n.oriented, 6)],
      ["reward", num(n.reward, 6)],
      [`advantage (${esc(D.estimator)})`, num(n.adv, 4)],
      ["policy version", `${n.version ?? "–"} <span class="hint">(${esc(r.versions)})</span>`],
      ["tokens", n.tokens],
      ["mean log-prob", num(n.logprob, 4)],
      ...(n.gate ? gate(n.gate) : []),
      ["parent", parent ? link(parent) : orphan],
      ["children", kids.map(link).join(" ") || "–"],
    ];
  }

  function siblings(n, r) {
    const row = (m) =>
      `<tr class="${m === n ? "cur" : ""}"><td>${link(m)}</td><td>${esc(m.mode)}</td>` +
      `<td>${esc(m.status)}</td><td>${num(m.reward)}</td><td>${num(m.adv, 3)}</td></tr>`;
    const head = "<tr><th>sibling</th><th>mode</th><th>status</th><th>reward</th><th>advantage</th></tr>";
    return `<table class="sibs">${head}${(r.groups.get(n.group) || []).map(row).join("")}</table>`;
  }

  window.treegrpo.panel = (n) => {
    const r = runOf.get(n.run);
    const parent = r.byId.get(n.parent);
    const code = hljs.highlight(T[n.code], { language: "python", ignoreIllegals: true }).value;
    const badge = `<span class="badge" style="background:${color(n.status)}">${esc(n.status)}</span>`;
    $("node-pane").innerHTML = `<h2>node <code>${esc(n.id)}</code> ${badge} ${esc(n.mode)}</h2>
      <dl class="facts">${facts(n, r, parent)
        .map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`)
        .join("")}</dl>
      <h3>the group's advantages (${esc(D.estimator)}, from the rewards)</h3>${siblings(n, r)}
      <h3>plan</h3><pre class="plan">${esc(T[n.plan]) || "(empty)"}</pre>
      <h3>code</h3><pre class="code"><code class="hljs">${code}</code></pre>
      <h3>diff against the parent</h3>
      ${parent ? diffHtml(T[parent.code], T[n.code]) : `<p class="hint">a draft: no parent</p>`}
      <h3>output tail (term_tail)</h3><pre class="tail">${esc(T[n.tail]) || "(empty)"}</pre>`;
    $("node-pane").scrollTop = 0;
  };
})();
