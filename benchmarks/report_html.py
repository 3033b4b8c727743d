"""report.html, the run explorer: its size and its load-to-interactive time in headless Chromium.

    .venv/bin/python benchmarks/report_html.py [--repeat 5] [--html PATH ...]

Cases (seed-format roots written by tests/archive_gen.py, reported as train + control pairs, as
`treegrpo run --control` writes them):
- demo: the demo's shape (treegrpo/examples/demo.toml: 2 tasks x 3 rounds x E2 x G8, 96 nodes an arm);
- gpu-preset: the GPU learning preset (learning-gpu.toml: 4 tasks x 3 rounds x E4 x G16, 768 nodes
  an arm, 1,536 in the page); code of ~2 KB and program output of ~1.5 KB a node, the demo
  policy's sizes, and no text shared between the arms (the real pairing shares round 1: smaller);
- round-256: one run whose rounds have 256 nodes (E4 x G64), the largest round the page must keep usable;
- baseline: the same page with no runs (the libraries and the page's script alone);
- every --html PATH: a report.html written by a real run (e.g. `make demo`'s).

Per case: the file's size, the Python time to write it, and over --repeat fresh pages (one browser,
every request but the file refused): ready = performance.now() when the explorer has drawn the
tree and the charts and attached its handlers (from navigation start), and click = the time from
clicking a node until its page (code, diff) is shown. Cases are loaded in turn (interleaved), so
load on the machine hits all alike. Medians (and the slowest ready); ratio = case / baseline ready.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.archive_gen import RunPlan, Size, write_run  # noqa: E402
from tests.browser import browser, open_report  # noqa: E402
from treegrpo.report import load_from_root, write_report  # noqa: E402
from treegrpo.report._html import write_html  # noqa: E402

TASKS4 = ("spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini")
CASES = {
    # name: (tasks, rounds, Size(group, expansions, tokens, text, tail), pair)
    "demo": (TASKS4[2:], 3, Size(8, 2, 400, 6000, 1500), True),
    "gpu-preset": (TASKS4, 3, Size(16, 4, 400, 6000, 1500), True),
    "round-256": (TASKS4[:1], 2, Size(64, 4, 400, 6000, 1500), False),
}


def build(case: str, tmp: Path) -> tuple[Path, int, float]:
    """Write the case's runs and report; (report.html, nodes in the page, seconds to write the report)."""
    tasks, rounds, size, pair = CASES[case]
    arms = [case, f"{case}-control"] if pair else [case]
    for i, arm in enumerate(arms):
        plan = RunPlan(arm, tasks[0], gate=True, full_rounds=rounds, more_tasks=tasks[1:])
        write_run(tmp / case / "runs", plan, size, seed=i)
    runs = [load_from_root(tmp / case / "runs" / arm)[0] for arm in arms]
    t0 = time.perf_counter()
    rep = write_report(runs[:1], tmp / case / "report", control=runs[1] if pair else None)
    return rep.html_path, sum(len(r.records) for r in runs), time.perf_counter() - t0


def load_once(ctx, html: Path) -> tuple[float, float | None]:
    """One fresh page: (ready ms, ms from clicking the round's last node to its page being shown)."""
    opened = open_report(ctx, html)
    page = opened.page
    assert not opened.console_errors, opened.console_errors
    assert opened.requests == [opened.url], opened.requests
    click = None
    nodes = page.locator("#tree .node")
    if nodes.count():
        t0 = time.perf_counter()
        nodes.nth(nodes.count() - 1).click()
        page.wait_for_selector("#node-pane pre.code", timeout=10_000)
        click = 1000 * (time.perf_counter() - t0)
    page.close()
    return opened.ready_ms, click


def summary(samples: list[tuple[float, float | None]]) -> dict:
    ready = [r for r, _ in samples]
    clicks = [c for _, c in samples if c is not None]
    return {
        "ready_ms": statistics.median(ready),
        "ready_max_ms": max(ready),
        "ready_all_ms": [round(x, 1) for x in ready],
        "click_ms": statistics.median(clicks) if clicks else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--html", type=Path, action="append", default=[], help="a real run's report.html")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, browser() as ctx:
        tmp = Path(tmp)
        base = write_html(
            tmp / "baseline.html", {"title": "baseline", "fields": [], "runs": [], "texts": [""]}
        )
        targets = [("baseline", base, 0, 0.0)]
        targets += [(c, *build(c, tmp)) for c in a.cases]
        targets += [(str(p), p, None, None) for p in a.html]
        samples: dict[str, list] = {name: [] for name, *_ in targets}
        for _ in range(a.repeat):  # interleaved, so load on the machine hits every case alike
            for name, html, *_ in targets:
                samples[name].append(load_once(ctx, html))
        for name, html, nodes, write_s in targets:
            row = {"case": name, "nodes": nodes, "mb": html.stat().st_size / 1e6, "write_s": write_s}
            rows.append(row | summary(samples[name]))
    base_ms = rows[0]["ready_ms"]
    for r in rows:
        r["ratio_vs_baseline"] = r["ready_ms"] / base_ms
        print(json.dumps(r))
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, median of {a.repeat}")
    for r in rows:
        click = "–" if r["click_ms"] is None else f"{r['click_ms']:.0f} ms"
        ready = f"{r['ready_ms']:.0f} ms (max {r['ready_max_ms']:.0f})"
        print(
            f"| {r['case']} | {r['nodes'] if r['nodes'] is not None else '?'} | {r['mb']:.2f} MB | "
            f"{ready} | x{r['ratio_vs_baseline']:.2f} | {click} |"
        )


if __name__ == "__main__":
    main()
