"""A re-spending run end to end (real processes, the tiny random model: every node fails, every group
has no reward variance): the re-spent groups' nodes are executed and graded like the tree's own, the
run finishes, and the learner skips the groups without signal."""

from __future__ import annotations

import pytest

from tests.e2e._harness import prepare_home, read_log, run_ids, start_run
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_re_spending_run_executes_and_grades_every_re_spent_node_once_and_finishes(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    proc = start_run(
        home,
        "treegrpo/examples/run-small.toml",
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        "run.tree.expansions=2",
        "run.tree.respend.enabled=true",
        "run.tree.respend.round_token_budget=64",
        "sampler.sampling.max_new_tokens=32",
    )
    assert proc.wait(500) == 0, (home / "run.log").read_text()[-4000:]
    (run_id,) = run_ids(home)
    log = read_log(home, run_id)
    assert log.counts[Kind.GROUP_RESPENT] >= 1, log.counts
    sampled = len(set(log.node_ids))
    own = 2 * 2 * 2  # run-small.toml: 2 rounds x E2 x G2 of one task; the rest are re-spent siblings
    assert sampled > own and sampled == log.counts[Kind.NODE_EXECUTED], log.counts
    assert log.counts[Kind.NODE_GRADED] == sampled, log.counts  # the re-spent nodes too, each once
    assert len(log.groups_trained) == len(set(log.groups_trained))  # never a group trained twice
