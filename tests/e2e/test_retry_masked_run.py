"""A run stopped by an infrastructure fault resumes with `--retry-masked` and runs its masked node
again (real `treegrpo run`, real processes; issue 32, item 5).

The fault is injected from outside, as in test_infrastructure_run.py: the sandbox's interpreter is
missing, so the executor masks the first node it cannot start (`infrastructure`) and, with
`executor.infra.fail_after = 1`, stops the run at once. The interpreter is then put in place (the
host fixed) and the run resumed. Before `--retry-masked` the option did not exist and a plain
`--resume` left the node masked for good: its group was scored without it, the export had one
record fewer than the run has nodes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e._harness import ROOT, env_for, export_records, prepare_home, read_log, run_argv, run_ids
from treegrpo.events import INFRASTRUCTURE, Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

UNIFORM = (  # a script that writes a valid (uniform) spooky submission: every node that runs is ok
    "import csv\nrows = list(csv.DictReader(open('input/test.csv')))\n"
    "with open('submission/submission.csv', 'w') as f:\n"
    "    f.write('id,EAP,HPL,MWS\\n')\n"
    "    for r in rows:\n"
    "        f.write(f\"{r['id']},0.3333333333,0.3333333333,0.3333333334\\n\")\n"
)


def test_a_run_stopped_by_a_broken_sandbox_resumes_and_runs_its_masked_node_once_more(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    src = home / "replay"
    src.mkdir()
    (src / "uniform.py").write_text(UNIFORM)
    python = tmp_path / "interp" / "bin" / "python"  # outside the jail's private /tmp mounts
    python.parent.mkdir(parents=True)  # ... and missing: the executor's host is broken
    sets = (
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        'sampler.backend="replay"',
        f'sampler.replay.source_dir="{src}"',
        "sampler.sampling.max_new_tokens=1024",  # the whole script (a replay is cut at the budget too)
        "run.rounds=1",
        "runner.timeout_s=300",
        "executor.max_concurrency=1",
        "executor.infra.fail_after=1",
        "executor.infra.retry_s=0.3",
        f'executor.local.python="{python}"',
    )
    first = subprocess.run(
        run_argv("treegrpo/examples/run-small.toml", sets=sets),
        env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert first.returncode == 1, (first.stdout + first.stderr)[-3000:]
    assert "the executor cannot run scripts" in first.stdout + first.stderr
    (run_id,) = run_ids(home)
    before = read_log(home, run_id)
    assert before.graded_status[INFRASTRUCTURE] == 1 and before.counts[Kind.GROUP_SCORED] == 0

    python.symlink_to(os.path.realpath(sys.executable))  # the host is fixed
    argv = run_argv("treegrpo/examples/run-small.toml", "--resume", run_id, "--retry-masked", sets=sets)
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=500)
    screen = done.stdout + done.stderr
    assert done.returncode == 0, screen[-4000:]
    assert "retrying 1 node(s) masked by infrastructure faults" in screen

    log = read_log(home, run_id)
    n = 3 * 2  # one round of 3 expansions x 2 siblings
    assert log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == n
    assert log.counts[Kind.NODE_RETRIED] == 1
    assert log.counts[Kind.NODE_EXECUTED] == log.counts[Kind.NODE_GRADED] == n + 1  # + the masked attempt
    assert log.graded_status == {"ok": n, INFRASTRUCTURE: 1}  # the masked attempt kept as history
    assert len(log.groups_scored) == len(set(log.groups_scored)) == 3  # each group scored once
    assert len(log.groups_trained) == len(set(log.groups_trained))  # and trained at most once
    records = export_records(home / "runs" / run_id / "export")
    assert len(records) == n and {r["status"] for r in records} == {"ok"}  # the export exact
    assert len({r["id"] for r in records}) == n
    report = (home / "runs" / run_id / "report" / "report.md").read_text()
    assert "| retried after infrastructure faults (--retry-masked) | 1 |" in report
    assert "| infrastructure (masked, not in nodes) | 0 |" in report
