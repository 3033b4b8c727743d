/* treegrpo run explorer, 3/4: the verdict line and the report's curves as Chart.js charts, each value
   with its 95 % interval as a band (two hidden series filled between). */
(() => {
  "use strict";
  const { D, runs, $, name } = window.treegrpo;
  const PALETTE = d3.schemeTableau10;

  function series(label, pts, i) {
    const c = PALETTE[i % PALETTE.length];
    const line = { label, data: pts.map((p) => ({ x: p.x, y: p.y })), borderColor: c, backgroundColor: c };
    if (!pts.some((p) => p.lo != null)) return [line];
    const band = (k, fill) => ({
      band: true,
      label: `${label} ${k}`,
      data: pts.map((p) => ({ x: p.x, y: p[k] })),
      borderWidth: 0,
      pointRadius: 0,
      fill,
      backgroundColor: c + "33",
    });
    return [line, band("lo", false), band("hi", "-1")];
  }

  function chart(title, xlabel, datasets) {
    if (!datasets.some((d) => d.data.some((p) => p.y != null))) return;
    const fig = document.createElement("figure");
    fig.innerHTML = "<canvas></canvas>";
    $("charts").append(fig);
    const legend = { boxWidth: 12, font: { size: 11 }, filter: (it, d) => !d.datasets[it.datasetIndex].band };
    new Chart(fig.firstChild, {
      type: "line",
      data: { datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: false,
        scales: { x: { type: "linear", title: { display: true, text: xlabel }, ticks: { stepSize: 1 } } },
        plugins: { title: { display: true, text: title }, legend: { labels: legend } },
      },
    });
  }

  const rows = (run, axis, task) => (D.curves?.[run]?.["by_" + axis] || []).filter((r) => r.task === task);
  const pts = (rs, x, m) => rs.map((r) => ({ x: r[x], y: r[m], lo: r[m + "_ci95"]?.[0], hi: r[m + "_ci95"]?.[1] }));
  const perTask = (f) => runs.flatMap((r) => r.tasks.map((t) => [r, t])).flatMap(([r, t], i) => f(r, t, i));
  const perRound = (m) =>
    perTask((r, t, i) =>
      series(
        `${name(r)} · ${t}`,
        r.rounds.filter((x) => x.task === t).map((x) => ({ x: x.round, y: x[m] })),
        i,
      ),
    );
  const pooled = (x, m) => runs.flatMap((r, i) => series(name(r), pts(rows(r.id, x, "pooled"), x, m), i));

  window.treegrpo.charts = () => {
    const vs = D.comparison ? " — train vs control" : "";
    chart("Crash share by round", "round", perRound("crash_rate"));
    chart("Best test metric by round (raw)", "round", perRound("best_test_metric"));
    chart("Sample score by round (pooled)" + vs, "round", pooled("round", "score"));
    chart("Failed share by round (pooled)" + vs, "round", pooled("round", "failed_share"));
    chart("Sample score by policy version (pooled)", "policy version", pooled("version", "score"));
    const oriented = (r, t, i) => series(`${name(r)} · ${t}`, pts(rows(r.id, "round", t), "round", "mean_oriented"), i);
    chart("Mean oriented metric of valid nodes by round", "round", perTask(oriented));
  };

  const speedTable = (sp) => {
    if (!sp) return;
    $("speed").hidden = false;
    $("speed-title").textContent = sp.title;
    $("speed-note").textContent = sp.note;
    const table = $("speed-table");
    const line = (cells, tag) => {
      const tr = document.createElement("tr");
      for (const text of cells) {
        const cell = document.createElement(tag);
        cell.textContent = text;
        tr.appendChild(cell);
      }
      table.appendChild(tr);
    };
    line(sp.head, "th");
    for (const row of sp.rows) line(row, "td");
  };

  window.treegrpo.header = () => {
    $("runs-line").textContent = runs
      .map((r) => `${r.id}${r.role === "run" ? "" : ` (${r.role})`}: ${r.nodes.length} nodes`)
      .join(" · ");
    const loads = runs.filter((r) => r.load);
    if (loads.length) {
      const b = $("load-banner");
      b.hidden = false;
      b.textContent = loads.map((r) => `${r.id}: ${D.load_line}`).join(" · ");
    }
    speedTable(D.speed);
    const c = D.comparison;
    if (!c && D.learning_note) {
      const v = $("verdict");
      v.hidden = false;
      v.className = "not-applicable";
      v.textContent = D.learning_note;
    }
    if (!c) return;
    const v = $("verdict");
    v.hidden = false;
    v.className = c.verdict.replace(" ", "-");
    v.textContent = `${c.line}  —  train ${c.train_run} vs control ${c.control_run}, rounds ${c.late_rounds.join(", ")}`;
  };
})();
