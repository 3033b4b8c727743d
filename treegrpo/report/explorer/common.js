/* treegrpo run explorer, 1/4: the data and small helpers shared by the page's scripts (window.treegrpo).
   The hard parts are the inlined libraries: d3 (tree layout, zoom), highlight.js (Python colouring),
   jsdiff (diff vs parent), Chart.js (curves). Data: the JSON element #treegrpo-data, built by
   treegrpo/report/_explorer.py: runs of nodes as rows under one header, texts in one string table. */
(() => {
  "use strict";
  const D = JSON.parse(document.getElementById("treegrpo-data").textContent);
  const COLORS = {
    ok: "#2e7d32",
    crashed: "#c62828",
    timeout: "#ef6c00",
    no_code: "#9e9e9e",
    no_submission: "#8d6e63",
    invalid_submission: "#6a1b9a",
  };
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" };
  const push = (m, k, v) => (m.get(k) || m.set(k, []).get(k)).push(v);
  const key = (task, round) => task + "\u0000" + round;

  // rows -> node objects, indexed by id, parent (children), sibling group and round
  const runs = D.runs.map((r) => {
    const nodes = r.nodes.map((row) => Object.fromEntries([["run", r.id], ...D.fields.map((f, i) => [f, row[i]])]));
    const run = { ...r, nodes, byId: new Map(nodes.map((n) => [n.id, n])) };
    Object.assign(run, { kids: new Map(), groups: new Map(), byRound: new Map() });
    for (const n of nodes) {
      if (n.parent && run.byId.has(n.parent)) push(run.kids, n.parent, n);
      push(run.groups, n.group, n);
      push(run.byRound, key(n.task, n.round), n);
    }
    run.info = new Map(r.rounds.map((x) => [key(x.task, x.round), x]));
    return run;
  });

  window.treegrpo = {
    D,
    T: D.texts,
    runs,
    runOf: new Map(runs.map((r) => [r.id, r])),
    key,
    COLORS,
    $: (id) => document.getElementById(id),
    color: (s) => COLORS[s] || "#455a64",
    esc: (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ESC[c]),
    num: (x, d = 4) => (x == null ? "–" : String(+x.toPrecision(d))),
    name: (r) => (r.role === "run" ? r.id : r.role), // "train" / "control" in a pair: short legends
  };
})();
