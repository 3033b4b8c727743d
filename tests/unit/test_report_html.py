"""report.html, the run explorer, without a browser: what the writer embeds and what it must not.

The browser test (tests/e2e/test_report_explorer_browser.py, slow) opens the page in Chromium; these
check the file itself: the data is the runs' nodes and texts, every script is inline, nothing names
an outside resource, the vendored libraries are the ones the manifest pins, and the CLI says where
the page is (and opens it with --open).

Imports a private module: `treegrpo.report._explorer`, `treegrpo.report._html` (what these tests
exercise is not on the package's public surface).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from importlib import resources

import pytest

from tests.archive_gen import generate
from treegrpo.advantages import compute as advantages
from treegrpo.archive import find_runs, read_nodes, read_run
from treegrpo.report import load_from_root, write_report
from treegrpo.report._explorer import FIELDS
from treegrpo.report._html import SCRIPTS, manifest, render
from treegrpo.report._html import read_embedded as embedded

pytestmark = pytest.mark.timeout(120)

HOSTILE = "x = '</script><script>alert(1)</script>'  # <!-- -->"


def nodes_of(data: dict, run_id: str) -> dict[str, dict]:
    run = next(r for r in data["runs"] if r["id"] == run_id)
    return {row[0]: dict(zip(data["fields"], row, strict=True)) for row in run["nodes"]}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A generated seed-format root (both node schemas, partial rounds) and its report."""
    root = tmp_path_factory.mktemp("seed") / "root"
    generate(root, "small")
    rep = write_report(load_from_root(root), root.parent / "rep")
    return root, rep, rep.html_path.read_text(encoding="utf-8")


def test_the_page_embeds_every_node_of_every_run_with_its_plan_code_and_output_tail(small):
    root, rep, page = small
    data = embedded(page)
    assert data["fields"] == list(FIELDS) and data["estimator"] == "grpo_valid_only"
    for run_dir in find_runs(root):
        run = read_run(run_dir)
        recs = [r for rnd in run.rounds for r in read_nodes(rnd, [])]
        got = nodes_of(data, run.run_id)
        assert set(got) == {r.id for r in recs}
        for r in recs:
            n = got[r.id]
            assert (n["task"], n["round"], n["step"], n["parent"], n["mode"], n["status"]) == (
                r.exp_id,
                r.round,
                r.step,
                r.parent_id,
                r.mode,
                r.status,
            )
            assert data["texts"][n["code"]] == r.code and data["texts"][n["plan"]] == (r.plan or "")
            assert data["texts"][n["tail"]] == r.term_tail and n["exc"] == r.exc_type
            assert n["tokens"] == len(r.response_token_ids)
            assert n["logprob"] == pytest.approx(
                sum(r.response_logprobs) / len(r.response_logprobs), abs=1e-4
            )
            assert (n["gate"] is not None) == run.run_id.startswith("s32")
    assert len(data["texts"]) == len(set(data["texts"]))  # each text once


def test_advantages_are_the_groups_own_under_the_named_estimator_and_the_best_node_is_the_summarys(small):
    root, rep, page = small
    data = embedded(page)
    got = nodes_of(data, "s32_full")
    run = read_run(root / "s32_full")
    by_group: dict[str, list] = {}
    for r in (r for rnd in run.rounds for r in read_nodes(rnd, [])):
        by_group.setdefault(r.sibling_group, []).append(r)
    for members in by_group.values():
        want = advantages("grpo_valid_only", [m.reward for m in members], [m.status for m in members])
        assert [got[m.id]["adv"] for m in members] == pytest.approx(want, abs=1e-6)
    rounds = next(r for r in data["runs"] if r["id"] == "s32_full")["rounds"]
    for rnd in run.rounds:
        if rnd.summary is not None:
            row = next(x for x in rounds if x["round"] == rnd.round)
            assert row["best_id"] == rnd.summary.best_node_id


def test_nothing_in_the_page_names_an_outside_resource_and_every_script_is_inline(small):
    page = small[2]
    assert not re.search(r"""<(script|link|img|iframe)[^>]*\s(src|href)\s*=""", page, re.I)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<link" not in page.lower()
    assert "default-src 'none'" in page  # the CSP: the browser itself refuses any request
    m = manifest()
    assert page.count("</script>") == 1 + len(m["scripts"]) + len(SCRIPTS)  # data, libraries, the page's own
    assert "sourceMappingURL" not in page
    for lib in m["libraries"]:
        assert f"{lib['name']} {lib['version']} ({lib['license']})" in page


def test_a_node_text_cannot_end_the_data_element_or_open_a_comment(tmp_path):
    payload = {"title": "t", "fields": ["id"], "runs": [], "texts": ["", HOSTILE], "curves": {}}
    page = render(payload)
    assert "alert(1)</script>" not in page and "<!-- -->" not in page
    assert embedded(page)["texts"][1] == HOSTILE


def test_the_vendored_libraries_are_the_pinned_files_with_their_licences():
    vendor = resources.files("treegrpo.report").joinpath("explorer", "vendor")
    m = manifest()
    names = {lib["name"] for lib in m["libraries"]}
    assert names == {"d3", "@highlightjs/cdn-assets", "diff", "chart.js"}
    for lib in m["libraries"]:
        for name, sha in lib["files"].items():
            assert hashlib.sha256(vendor.joinpath(name).read_bytes()).hexdigest() == sha, name
        text = vendor.joinpath(*lib["license_file"].split("/")).read_text()
        assert "Permission" in text or "Redistribution" in text, lib["name"]
    assert set(m["scripts"]) | set(m["styles"]) <= {n for lib in m["libraries"] for n in lib["files"]}


def test_a_train_control_pair_shows_the_verdict_and_stores_the_shared_round_one_code_once(tmp_path):
    generate(tmp_path / "root", "small")
    shutil.copytree(tmp_path / "root" / "s32_full", tmp_path / "ctl" / "s32_full-control")
    (train,) = load_from_root(tmp_path / "root" / "s32_full")
    (control,) = load_from_root(tmp_path / "ctl" / "s32_full-control")
    rep = write_report([train], tmp_path / "rep", control=control)
    data = embedded(rep.html_path.read_text(encoding="utf-8"))
    assert [(r["id"], r["role"]) for r in data["runs"]] == [
        ("s32_full", "train"),
        ("s32_full-control", "control"),
    ]
    assert data["comparison"]["verdict"] == rep.comparison.verdict
    assert data["comparison"]["line"].startswith("verdict: ")
    codes = [row[FIELDS.index("code")] for r in data["runs"] for row in r["nodes"]]
    assert len(codes) == 2 * len(train.records) and len(set(codes)) == len(train.records)
    assert set(data["curves"]) == {"s32_full", "s32_full-control"}


def test_the_cli_prints_a_file_link_and_open_hands_it_to_the_browser(tmp_path):
    generate(tmp_path / "root", "small")
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    env = {**os.environ, "BROWSER": f"{browser} %s"}  # webbrowser's own hook for the user's browser
    out = tmp_path / "rep"
    argv = [
        sys.executable,
        "-m",
        "treegrpo.cli",
        "report",
        str(tmp_path / "root"),
        "--out",
        str(out),
        "--open",
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    uri = (out / "report.html").resolve().as_uri()
    assert f"explorer: {uri}" in done.stdout
    assert opened.read_text() == uri
