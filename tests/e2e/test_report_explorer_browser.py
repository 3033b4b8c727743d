"""report.html in a real browser (slow): headless Debian Chromium, driven by Playwright, as a person
would use it.

The first test opens the explorer of a real run: the demo's train arm and its no-train control
(`demo_pair`, conftest.py: the SFT'd demo policy, demo.toml, seed 0). What the page must show is
taken from the run's seed-format exports, not from the page's own data: every node of every
round is drawn, a crashed node shows its exception and output tail, an improve node whose code
differs from its parent's shows a non-empty diff, the verdict of report.json is visible; the
console stays free of errors and the page asks for nothing but its own file (every other request
is refused and recorded). The second opens a generated seed-format root with a 256-node round.
Screenshots go under each test's tmp_path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.archive_gen import RunPlan, Size, generate, write_run
from tests.browser import browser, chromium_path, open_report
from tests.e2e._harness import export_records
from treegrpo.report import load_from_root, write_report

pytestmark = [pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_chromium():
    import playwright  # noqa: F401  the dev extra installs it: a failure here, never a skip

    assert chromium_path(), "no chromium: `make browser` installs Debian's"


def show_round(page, run: str, task: str, rnd: int) -> set[str]:
    """Switch the page to one round through its controls; the node ids the tree then draws."""
    page.select_option("#sel-run", run)
    page.select_option("#sel-task", task)
    page.select_option("#sel-round", str(rnd))
    return set(page.locator("#tree .node").evaluate_all("els => els.map(e => e.dataset.id)"))


def by_round(records: list[dict]) -> dict[tuple[str, int], set[str]]:
    out: dict[tuple[str, int], set[str]] = {}
    for r in records:
        out.setdefault((r["exp_id"], r["round"]), set()).add(r["id"])
    return out


def click(page, run: str, node: dict) -> str:
    show_round(page, run, node["exp_id"], node["round"])
    page.locator(f'#tree .node[data-id="{node["id"]}"]').click()
    page.wait_for_selector(f'#node-pane h2:has-text("{node["id"]}")')
    return page.inner_text("#node-pane")


@pytest.mark.timeout(2400)
def test_the_explorer_of_a_real_train_control_pair_shows_every_node_crashes_diffs_and_the_verdict(
    demo_pair, tmp_path
):
    home, train = demo_pair
    arms = {run: export_records(home / "runs" / run / "export") for run in (train, f"{train}-control")}
    report = home / "runs" / train / "report"
    verdict = json.loads((report / "report.json").read_text())["learning"]["verdict"]
    with browser() as ctx:
        opened = open_report(ctx, report / "report.html")
        page = opened.page
        for run, records in arms.items():
            for (task, rnd), ids in by_round(records).items():
                assert show_round(page, run, task, rnd) == ids, (run, task, rnd)

        # a crashed node: its exception and the end of its output, as the executor recorded them
        crashed = [(run, r) for run, recs in arms.items() for r in recs if r["status"] == "crashed"]
        assert crashed, "the demo run crashed no node: nothing to click"
        run, node = crashed[0]
        text = click(page, run, node)
        assert node["exc_type"] and node["exc_type"] in text
        assert node["term_tail"].strip().splitlines()[-1].strip() in text

        # an improve node whose code differs from its parent's: the diff has added/removed lines
        code = {r["id"]: r["code"] for recs in arms.values() for r in recs}
        improved = [
            (run, r)
            for run, recs in arms.items()
            for r in recs
            if r["mode"] == "improve" and r["parent_id"] in code and r["code"] != code[r["parent_id"]]
        ]
        assert improved, "no improve node changed its parent's code"
        run, node = improved[0]
        click(page, run, node)
        changed = page.locator("#node-pane pre.diff .add, #node-pane pre.diff .del")
        assert changed.count() > 0
        added = [x[1:] for x in changed.all_inner_texts() if x.startswith("+") and x[1:].strip()]
        assert all(line in node["code"] for line in added)
        assert page.locator("#node-pane pre.code .hljs-keyword").count() > 0  # syntax-coloured

        assert page.locator("#verdict").is_visible()
        assert page.inner_text("#verdict").startswith(f"verdict: {verdict}")
        assert page.locator("#charts canvas").count() >= 4
        page.screenshot(path=str(tmp_path / "explorer.png"), full_page=True)
        assert not opened.console_errors, opened.console_errors
        assert opened.requests == [opened.url], opened.requests
    assert (tmp_path / "explorer.png").stat().st_size > 10_000


@pytest.mark.timeout(300)
def test_the_explorer_of_a_seed_format_root_keeps_a_256_node_round_usable(tmp_path):
    generate(tmp_path / "root", "small")  # the seed's layout: both node schemas, partial rounds
    big = RunPlan("wide", "spooky-mini", gate=True, full_rounds=1)
    write_run(tmp_path / "root", big, Size(64, 4, 40, 200), seed=0)  # E4 x G64: one 256-node round
    rep = write_report(load_from_root(tmp_path / "root"), tmp_path / "rep")
    shutil.rmtree(tmp_path / "root")  # the page needs nothing beside it
    with browser() as ctx:
        opened = open_report(ctx, Path(rep.html_path))
        page = opened.page
        assert len(show_round(page, "wide", "spooky-mini", 1)) == 256
        assert opened.ready_ms < 2000
        page.uncheck('#f-status input[value="crashed"]')
        shown = page.locator("#tree .node:not(.off)").count()
        crashed = page.locator('#tree .node[data-status="crashed"]').count()
        assert 0 < crashed and shown == 256 - crashed
        page.check('#f-status input[value="crashed"]')
        page.locator("#tree .node").nth(200).click()
        assert page.locator("#node-pane pre.code").is_visible()
        assert len(show_round(page, "s32_full", "cactus-mini", 2)) == 16
        page.screenshot(path=str(tmp_path / "round-256.png"), full_page=True)
        assert not opened.console_errors, opened.console_errors
        assert opened.requests == [opened.url], opened.requests
