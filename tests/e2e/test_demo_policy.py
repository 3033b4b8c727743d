"""The demo's SFT'd policy writes code that runs (slow; `make test-slow`).

Builds the demo policy exactly as `make demo` does (`prepare_demo_policy`: the small local model,
its line-level tokenizer, the fixed SFT recipe on the seed corpus; ~5 minutes on 2 CPU cores),
then runs the embedded default's first round for real with `treegrpo run treegrpo/examples/demo.toml`
(four service processes, the local sandbox, the grader; no training) and reads the exported
node records. Issue 9's bar: fewer than 60% of the round's nodes fail (final status not `ok`),
and every task has valid, graded nodes. Measured on the dev machine on 2026-11-30 over five runs
of this round with the same weights: 6%, 8%, 11%, 11%, 17% failed (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.e2e._harness import prepare_home, run_ids, start_run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

TASKS = ["spooky-mini", "cactus-mini", "plant-mini", "dogscats-mini"]


def test_the_sft_demo_policy_fails_under_60_percent_of_first_round_nodes_with_valid_nodes_in_every_task(
    tmp_path, monkeypatch, demo_policy
):
    home = tmp_path / "home"
    monkeypatch.setenv("TREEGRPO_HOME", str(home))
    prepare_home(home)
    model = demo_policy
    meta = json.loads((model / "sft_meta.json").read_text())["result"]
    assert meta["final_loss"] < 0.2 * meta["first_loss"]
    # the first round at the shape these numbers were measured at (four tasks, E3 x G3), whatever
    # tree the demo itself runs
    proc = start_run(
        home,
        "treegrpo/examples/demo.toml",
        "run.rounds=1",
        "run.train=false",
        f"run.tasks={TASKS}",
        "run.tree.expansions=3",
        "run.tree.group_size=3",
        "run.tree.drafts=2",
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
    )
    assert proc.wait(900) == 0, (home / "run.log").read_text()[-4000:]
    (run_id,) = run_ids(home)
    status_by_task: dict[str, list[str]] = defaultdict(list)
    for path in (home / "runs" / run_id / "export").rglob("round_1/*.jsonl"):
        task = path.name.split("__")[0]
        status_by_task[task] += [
            json.loads(line)["status"] for line in path.read_text().splitlines() if line.strip()
        ]
    statuses = [s for v in status_by_task.values() for s in v]
    assert sorted(status_by_task) == sorted(TASKS) and len(statuses) == 4 * 3 * 3
    failed = sum(s != "ok" for s in statuses) / len(statuses)
    print(f"first round: {failed:.0%} failed; by task", {t: v.count("ok") for t, v in status_by_task.items()})
    assert failed < 0.6, status_by_task
    assert all("ok" in v for v in status_by_task.values()), status_by_task
