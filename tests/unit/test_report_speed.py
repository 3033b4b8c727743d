"""The seed's speed table (`treegrpo report A --against B`) and the marking of load runs.

Imports a private module: `treegrpo.report._data`, `treegrpo.report._html`, `treegrpo.report._speed`
(what these tests exercise is not on the package's public surface).
"""

from __future__ import annotations

import pytest

from treegrpo.archive import NodeRecord, TimingLine
from treegrpo.report import RunData, write_report
from treegrpo.report._data import LOAD_LINE, LOAD_SOURCE, LOAD_TASK_IDS
from treegrpo.report._html import read_embedded
from treegrpo.report._speed import speed_table

pytestmark = pytest.mark.timeout(30)


def _run(
    run_id: str, phases: dict[int, dict[str, float]], nodes: int, task: str = "spooky-mini", **kw
) -> RunData:
    """One sibling group of `nodes` nodes per round; step s trains on round s's group."""
    data = RunData(run_id, source="test")
    for step, ph in phases.items():
        group = f"{run_id}-g{step}"
        data.step_groups[step] = [group]
        data.timing.append(TimingLine(step, sum(ph.values()), dict(ph)))
        for i in range(nodes):
            oriented = 0.1 * ((i * 7 + step) % 9) + kw.get("shift", 0.0) * (step > 1)
            data.records.append(
                NodeRecord(
                    id=f"{run_id}-{step}-{i}",
                    step=0,
                    round=step,
                    exp_id=task,
                    parent_id=None,
                    sibling_group=group,
                    mode="draft",
                    status="ok",
                    oriented=oriented,
                    test_metric=oriented,
                    reward=oriented,
                    source=kw.get("source", "grade"),
                )
            )
            data.fingerprints[f"{run_id}-{step}-{i}"] = f"{step}-{i}"
            data.versions[f"{run_id}-{step}-{i}"] = step - 1
    return data


def _phases(scale: float, sleep: bool = False) -> dict[str, float]:
    out = {"update_weights": 2 * scale, "gen": 100 * scale, "old_log_prob": 5 * scale, "ref": 5 * scale}
    out |= {"adv": 0.5, "update_actor": 40 * scale}
    return out | ({"sleep": 3.0, "wake": 4.0} if sleep else {})


def _pair() -> tuple[RunData, RunData]:
    a = _run("nine", {1: _phases(1.0, True), 2: _phases(1.2, True), 3: _phases(0.8, True)}, nodes=64)
    b = _run("twenty7", {s: _phases(2.5) for s in (1, 2, 3, 4)}, nodes=32)  # step 4: A never logged it
    return a, b


def test_speed_table_gives_medians_over_the_common_steps_extra_phases_and_per_node_ratio():
    a, b = _pair()
    t = speed_table(a, b, cold_steps=0)
    assert t.steps == [1, 2, 3]
    rows = {r.name: r for r in t.phases}
    assert list(rows) == [
        "update_weights",
        "gen",
        "old_log_prob",
        "ref",
        "adv",
        "update_actor",
        "sleep",
        "wake",
        "total",
    ]
    assert rows["gen"].a == pytest.approx(100.0) and rows["gen"].b == pytest.approx(250.0)
    assert rows["gen"].ratio == pytest.approx(2.5) and rows["adv"].ratio == pytest.approx(1.0)
    assert rows["sleep"].a == 3.0 and rows["sleep"].b is None and rows["sleep"].ratio is None
    total_a, total_b = 152.5 + 7.0, 152.5 * 2.5 - 0.5 * 1.5  # step 1 of each (the median step)
    assert rows["total"].a == pytest.approx(total_a) and rows["total"].b == pytest.approx(total_b)
    assert t.per_node.a == pytest.approx(total_a / 64) and t.per_node.b == pytest.approx(total_b / 32)
    assert t.per_node.ratio == pytest.approx(2 * total_b / total_a)
    assert t.gpu_busy is None  # neither run records one


def test_gpu_busy_share_is_shown_when_a_run_records_one():
    a, b = _pair()
    a.gpu_busy = {1: 0.8, 2: 0.9, 3: 0.7}
    t = speed_table(a, b, cold_steps=0)
    assert t.gpu_busy is not None and t.gpu_busy.a == pytest.approx(0.8) and t.gpu_busy.b is None


def test_the_first_common_step_is_left_out_as_cold_unless_it_is_the_only_one():
    a, b = _pair()
    a.timing[0] = TimingLine(1, 999.0, _phases(10.0, True))  # step 1: the engine's start, autotune
    t = speed_table(a, b)
    assert t.steps == [2, 3] and t.left_out == (1,)
    rows = {r.name: r for r in t.phases}
    assert rows["gen"].a == pytest.approx(100.0)  # median of steps 2 and 3 (120, 80); 1000 left out
    assert t.as_dict()["cold_steps_left_out"] == [1]
    one_a = _run("one", {1: _phases(1.0)}, nodes=8)
    one_b = _run("other", {1: _phases(2.0)}, nodes=8)
    only = speed_table(one_a, one_b)
    assert only.steps == [1] and only.left_out == ()  # nothing else to compare: kept


def test_report_against_writes_the_speed_table_to_markdown_json_and_the_explorer(tmp_path):
    a, b = _pair()
    rep = write_report([a], tmp_path, against=b)
    md = rep.markdown_path.read_text()
    assert "## Speed: per-step phases, nine (A) against twenty7 (B)" in md
    assert "| gen | 100.0 s | 250.0 s | 2.50× |" in md and "| sleep | 3.0 s | – s | – |" in md
    ratio = rep.speed.per_node.ratio
    assert f"nine is {ratio:.2f}× cheaper per node than twenty7." in md
    assert rep.data["speed"]["phases"]["gen"]["ratio_b_over_a"] == pytest.approx(2.5)
    assert [m.run_id for m in rep.runs] == ["nine", "twenty7"]
    page = read_embedded(rep.html_path.read_text())
    assert page["speed"]["rows"][1] == ["gen", "100.0 s", "250.0 s", "2.50×"]
    assert page["speed"]["head"][1:] == ["A: nine", "B: twenty7", "B/A"]


def test_a_load_run_is_marked_and_its_control_comparison_is_not_applicable(tmp_path):
    phases = {s: _phases(1.0) for s in (1, 2, 3, 4)}
    train = _run("load-train", phases, nodes=16, task="load-bytes", source=LOAD_SOURCE, shift=0.5)
    control = _run("load-ctl", phases, nodes=16, task="load-bytes", source=LOAD_SOURCE)
    rep = write_report([train], tmp_path, control=control)
    md = rep.markdown_path.read_text()
    assert rep.comparison is None and "learning" not in rep.plots
    assert f"`load-train`: {LOAD_LINE}" in md and f"`load-ctl`: {LOAD_LINE}" in md
    assert "not applicable: load run" in md and "learned" not in md
    assert rep.data["learning"]["verdict"] == "not applicable: load run"
    assert all(r["load_run"] for r in rep.data["runs"]) and rep.data["load_runs"] == [
        "load-train",
        "load-ctl",
    ]
    page = read_embedded(rep.html_path.read_text())
    assert page["comparison"] is None and "not applicable: load run" in page["learning_note"]
    assert all(r["load"] for r in page["runs"]) and page["load_line"] == LOAD_LINE


def test_a_learning_run_is_not_marked_as_a_load_run(tmp_path):
    a, _ = _pair()
    rep = write_report([a], tmp_path)
    assert LOAD_LINE not in rep.markdown_path.read_text() and rep.data["load_runs"] == []


def test_the_reports_load_names_are_the_tasks_own():
    from treegrpo.tasks import LOAD_SOURCE as TASKS_SOURCE
    from treegrpo.tasks import LOAD_TASKS

    assert LOAD_TASK_IDS == LOAD_TASKS and LOAD_SOURCE == TASKS_SOURCE
