"""Retrying masked nodes on resume (`--retry-masked`): the ids of a node's attempts, which nodes the
runner chooses, and how projections see a retried node (its newest attempt, counted once).

Imports a private module: `treegrpo.runner._retry` (the runner's choice of nodes, a pure function).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from treegrpo import events
from treegrpo.archive import RunFacts
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.runner import Progress
from treegrpo.runner._retry import Attempts, plan
from treegrpo.v1 import events_pb2 as pb

pytestmark = pytest.mark.timeout(30)
RUN, TASK = "r1", "spooky-mini"


def nid(step: int, i: int) -> str:
    return events.node_id(RUN, TASK, 1, step, i)


def gid(step: int) -> str:
    return events.group_id(RUN, TASK, 1, step)


def graded(step: int, i: int, status: str, attempt: int = 0, size: int = 2) -> pb.Event:
    body = pb.NodeGraded(
        node_id=nid(step, i), task=TASK, round=1, step=step, sibling_group=gid(step), group_size=size,
        status=status, attempt=attempt,
    )  # fmt: skip
    if status == INFRASTRUCTURE:
        body.grade_error = "executing failed on our side after 3 attempt(s): SandboxError: no python"
    return events.make_event(RUN, "grader/t", body)


def retried(step: int, i: int, attempt: int, size: int = 2) -> pb.Event:
    body = pb.NodeRetried(
        node_id=nid(step, i), task=TASK, round=1, step=step, sibling_group=gid(step), group_size=size,
        index_in_group=i, attempt=attempt, run_attempt=2,
    )  # fmt: skip
    return events.make_event(RUN, "runner", body)


def scored(step: int) -> pb.Event:
    return events.make_event(
        RUN, "grader/t", pb.GroupScored(sibling_group=gid(step), task=TASK, round=1, step=step)
    )


def seen(*evs: pb.Event) -> Attempts:
    out = Attempts()
    for e in evs:
        out.add(e)
    return out


def test_a_retry_is_keyed_by_node_and_attempt_and_a_first_attempt_keeps_its_old_id():
    ev = retried(0, 1, 2)
    assert ev.envelope.event_id == f"{RUN}.node.retried.{nid(0, 1)}.2"
    assert events.subject_of(ev) == f"tg.{RUN}.node.retried.{nid(0, 1)}.2"
    assert events.make_event(RUN, "runner", ev.node_retried).envelope.event_id == ev.envelope.event_id
    first = graded(0, 1, "ok")  # attempt 0: every node before retries, the same id as ever
    assert first.envelope.event_id == f"{RUN}.node.graded.{nid(0, 1)}"
    assert graded(0, 1, "ok", attempt=1).envelope.event_id == first.envelope.event_id
    again = graded(0, 1, "ok", attempt=2)
    assert events.subject_of(again) == f"tg.{RUN}.node.graded.{nid(0, 1)}.2"
    ex = pb.NodeExecuted(node_id=nid(0, 1), attempt=3)
    assert events.make_event(RUN, "executor/t", ex).envelope.event_id == f"{RUN}.node.executed.{nid(0, 1)}.3"
    assert events.attempt_key("n", 1) == "n" and events.attempt_key("n", 2) == ("n", "2")


def test_a_retry_whose_ids_are_not_its_nodes_place_is_misderived():
    assert events.misderived(RUN, retried(0, 1, 2).node_retried) == ""
    wrong_index = retried(0, 1, 2).node_retried
    wrong_index.index_in_group = 0
    assert "not that of its place" in events.misderived(RUN, wrong_index)
    assert "attempt is 2 or more" in events.misderived(RUN, retried(0, 1, 1).node_retried)
    other_group = retried(0, 1, 2).node_retried
    other_group.sibling_group = gid(1)
    assert "is not the group" in events.misderived(RUN, other_group)


def test_the_runner_retries_masked_nodes_of_unscored_groups_only():
    log = seen(
        graded(0, 0, "ok"), graded(0, 1, INFRASTRUCTURE), scored(0),  # scored with the masked one
        graded(1, 0, INFRASTRUCTURE),  # its sibling never ran: the group is open
        graded(2, 0, "crashed"), graded(2, 1, "ok"), scored(2),
    )  # fmt: skip
    p = plan(RUN, log, run_attempt=2)
    assert [(r.node_id, r.attempt, r.index_in_group, r.run_attempt) for r in p.retry] == [
        (nid(1, 0), 2, 0, 2)
    ]
    assert "SandboxError" in p.retry[0].reason and p.retry[0].sibling_group == gid(1)
    assert p.kept == [nid(0, 1)] and p.pending == []
    assert p.line() == (
        "retrying 1 node(s) masked by infrastructure faults; 1 stay masked (their group is already scored)"
    )


def test_a_retry_asked_and_not_yet_graded_is_pending_not_asked_again():
    p = plan(RUN, seen(graded(1, 0, INFRASTRUCTURE), retried(1, 0, 2)), run_attempt=3)
    assert p.retry == [] and p.pending == [nid(1, 0)]


def test_a_retry_masked_again_is_retried_as_the_next_attempt_and_one_that_ran_is_not():
    again = seen(graded(1, 0, INFRASTRUCTURE), retried(1, 0, 2), graded(1, 0, INFRASTRUCTURE, attempt=2))
    assert [(r.node_id, r.attempt) for r in plan(RUN, again, 3).retry] == [(nid(1, 0), 3)]
    ran = seen(graded(1, 0, INFRASTRUCTURE), retried(1, 0, 2), graded(1, 0, "ok", attempt=2))
    p = plan(RUN, ran, 3)
    assert p.retry == p.pending == p.kept == []
    # the newest attempt stands whatever order the facts come in
    late = seen(retried(1, 0, 2), graded(1, 0, "ok", attempt=2), graded(1, 0, INFRASTRUCTURE))
    assert plan(RUN, late, 3).retry == []


def test_a_masked_node_whose_ids_are_not_the_contracts_stays_masked():
    body = graded(1, 0, INFRASTRUCTURE).node_graded
    body.node_id = "imported-7"
    p = plan(RUN, seen(events.make_event(RUN, "archive-import", body)), 2)
    assert p.retry == [] and p.kept == ["imported-7"]


def test_the_export_joins_a_retried_node_as_its_newest_attempt_and_counts_it():
    facts = RunFacts(RUN)
    for e in (
        graded(1, 0, INFRASTRUCTURE),
        retried(1, 0, 2),
        graded(1, 0, "ok", attempt=2),
        graded(1, 1, "ok"),
    ):
        facts.add(e)
    assert facts.infrastructure == {} and facts.graded[nid(1, 0)].attempt == 2
    assert facts.retried == {nid(1, 0): 2}
    assert facts.round(TASK, 1).node_ids == [nid(1, 0), nid(1, 1)]  # once each
    facts.add(graded(1, 0, INFRASTRUCTURE))  # an older attempt's fact read again never replaces it
    assert facts.graded[nid(1, 0)].status == "ok" and facts.infrastructure == {}
    masked_again = RunFacts(RUN)
    for e in (graded(1, 0, INFRASTRUCTURE), graded(1, 0, INFRASTRUCTURE, attempt=2)):
        masked_again.add(e)
    assert list(masked_again.infrastructure) == [nid(1, 0)] and masked_again.graded == {}


def test_the_progress_counts_a_retried_node_once_with_its_newest_status():
    progress = Progress([TASK], rounds=1, train=False)
    for e in (graded(1, 0, INFRASTRUCTURE), graded(1, 1, "ok"), graded(1, 0, "ok", attempt=2)):
        progress.apply(e)
    tp = progress.per_task[TASK]
    assert tp.graded == 2 and tp.retried == 1 and progress.retried == 1
    assert tp.statuses[INFRASTRUCTURE] == 0 and tp.statuses["ok"] == 2
    assert Kind.NODE_RETRIED.field == "node_retried"


def test_retry_masked_without_resume_is_refused_before_anything_starts():
    argv = [sys.executable, "-m", "treegrpo.cli", "run", "run-small", "--retry-masked"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "needs --resume" in done.stdout, done.stdout + done.stderr
