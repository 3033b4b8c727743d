"""GraderService: `node.executed` -> `node.graded` -> (once per sibling group) `group.scored`.

Per node: if the log already holds its `node.graded` (a redelivery after a crash), reuse it;
otherwise grade (nodes the executor did not mark `ok` keep their status and are not graded; a load
task's nodes are scored from their completion's bytes, treegrpo/tasks/_load.py), publish, and then
see whether the node completed its sibling group. Every step is idempotent and every fact has a
deterministic id, so a crash anywhere just replays the same facts. A retried node's attempt
(`--retry-masked`) is graded as any node, its fact keyed by the attempt; its group is scored on
every member's newest attempt, and never a second time (`_groups.py`).

Grading that fails on our side (answers or task data unreadable, the submission object lost from
the store, a bug of ours) is retried `infra.attempts` times, then the node is recorded with status
`infrastructure`: masked out of its group, never a penalty the policy did not earn
(treegrpo/fault_policy.py). `infra.fail_after` such nodes in a row stop the run.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path

from treegrpo import events
from treegrpo.bus import SUBMISSIONS, ConsumerOptions, Delivery, PermanentError, TransientError
from treegrpo.events import INFRASTRUCTURE, Kind, Status
from treegrpo.fault_policy import FaultStreak, retry_or_give_up
from treegrpo.service import HandlerFn, Service
from treegrpo.tasks import (
    LOAD_SOURCE,
    LOAD_TASKS,
    AnswersUnavailable,
    GradeResult,
    InvalidSubmission,
    Task,
    TaskRegistry,
    UnknownTask,
    UnsupportedCompetition,
    check_size,
    completion_score,
    ensure_builtin_tasks,
    grade_submission,
)
from treegrpo.v1 import events_pb2 as pb
from treegrpo_grader._groups import GroupTracker
from treegrpo_grader.config import GraderConfig

log = logging.getLogger(__name__)


def graded_from_executed(ex: pb.NodeExecuted) -> pb.NodeGraded:
    """The fields every graded fact copies from its executed fact."""
    body = pb.NodeGraded(
        node_id=ex.node_id,
        task=ex.task,
        round=ex.round,
        step=ex.step,
        sibling_group=ex.sibling_group,
        group_size=ex.group_size,
        status=ex.status,
        is_buggy=True,
        source="none",
        exec_time=ex.exec_time,
        mode=ex.mode,
        attempt=ex.attempt,  # a retried node's attempt: its graded fact is keyed by it too
    )
    if ex.HasField("parent_id"):
        body.parent_id = ex.parent_id
    if ex.status == INFRASTRUCTURE:  # the executor's fault, not the policy's: masked, no failure
        body.is_buggy, body.grade_error = False, ex.term_tail
    return body


def masked(ex: pb.NodeExecuted, fault: str) -> pb.NodeGraded:
    """A node our grading failed on: recorded with status `infrastructure` and why."""
    body = graded_from_executed(ex)
    body.status, body.is_buggy, body.grade_error = INFRASTRUCTURE, False, fault
    return body


class SubmissionLost(RuntimeError):
    """The executor stored the submission (it says so), but the store does not have it: ours."""


class NodeSampledLost(RuntimeError):
    """A load task's node has no node.sampled on the log to score: ours (retried, then masked)."""


def apply_result(body: pb.NodeGraded, result: GradeResult) -> pb.NodeGraded:
    body.status = result.status
    body.is_buggy = not result.valid
    if result.valid:
        body.test_metric, body.oriented, body.source = result.test_metric, result.oriented, "grade"
    else:
        body.grade_error = result.grade_error or "invalid submission"
    return body


class GraderService(Service):
    name = "grader"
    config_cls = GraderConfig

    def __init__(self, config: GraderConfig, instance: str | None = None):
        super().__init__(config, instance)
        self.config: GraderConfig = config
        self.registry = TaskRegistry(config.home(), config.mlebench_roots, config.builtin_seed)
        self.groups: GroupTracker | None = None
        self._scratch: Path | None = None
        self.graded = 0
        self.streak = FaultStreak(config.infra.fail_after)  # nodes lost to our grading faults in a row

    def handlers(self) -> dict[str, HandlerFn]:
        return {Kind.NODE_EXECUTED: self.on_node_executed}

    def consumer_options(self) -> ConsumerOptions:
        return ConsumerOptions(max_inflight=self.config.max_inflight, ack_wait_s=60.0)

    async def on_setup(self) -> None:
        assert self.bus is not None
        self.groups = GroupTracker(self.bus, self.config.rewards.shaping())
        base = Path(self.config.scratch_dir).expanduser() if self.config.scratch_dir else None
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="grader-", dir=base))
        if self.config.prepare_builtins:
            await asyncio.to_thread(ensure_builtin_tasks, self.config.home(), self.config.builtin_seed)

    async def on_stop(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    # -- the handler -------------------------------------------------------------------------------
    async def on_node_executed(self, event: pb.Event, delivery: Delivery) -> None:
        assert self.bus is not None and self.groups is not None
        ex, run_id = event.node_executed, event.envelope.run_id
        if not ex.node_id or not ex.sibling_group or ex.group_size < 1:
            raise PermanentError(
                f"node.executed lacks node_id, sibling_group or group_size: {event.envelope.event_id}"
            )
        misfit = events.misderived(run_id, ex)
        if misfit:  # no executor of ours wrote it: grading it would add a node to the run
            raise PermanentError(f"not a node of run {run_id}: {misfit}")
        key = events.attempt_key(ex.node_id, ex.attempt)  # a retried node's attempt has its own
        prior = await self.bus.last_event(run_id, Kind.NODE_GRADED, key)
        if prior is not None:
            graded = prior.node_graded
        else:
            graded = await self._grade_or_mask(run_id, ex, delivery)
            await self.publish(run_id, graded)
            self.graded += 1
            self._count(ex, graded)
        scored = await self.groups.on_graded(run_id, graded)
        if scored is not None:
            if not await self.groups.already_scored(run_id, scored.sibling_group):
                await self.publish(run_id, scored)
            self.groups.mark_scored(run_id, scored.sibling_group)

    async def _grade_or_mask(self, run_id: str, ex: pb.NodeExecuted, delivery: Delivery) -> pb.NodeGraded:
        try:
            return await self.grade(run_id, ex)
        except Exception as exc:  # ours, not the submission's (cancellation is no Exception: it naks)
            if self.stopping.is_set():  # our own shutdown: the node is graded again later
                raise TransientError(f"grader stopping while grading {ex.node_id}", 1.0) from exc
            delay = exc.delay_s if isinstance(exc, TransientError) else self.config.infra.retry_s
            fault = retry_or_give_up(
                delivery, self.config.infra.attempts, f"grading {ex.node_id}", exc, delay
            )
            log.error("node %s masked as an infrastructure fault: %s", ex.node_id, fault)
            self.note_error(fault)
            return masked(ex, fault)

    def _count(self, ex: pb.NodeExecuted, graded: pb.NodeGraded) -> None:
        """Our own grading faults in a row (the executor's are its to count) stop the run."""
        if ex.status == INFRASTRUCTURE:
            return
        if graded.status != INFRASTRUCTURE:
            self.streak.ok()
        elif self.streak.fault(graded.grade_error):
            self.fail(self.streak.message("grader", "grade submissions"))

    async def grade(self, run_id: str, ex: pb.NodeExecuted) -> pb.NodeGraded:
        body = graded_from_executed(ex)
        if ex.task in LOAD_TASKS and ex.status != INFRASTRUCTURE:  # an executor fault stays masked
            return await self._grade_load(run_id, body)
        if ex.status != Status.OK:
            return body  # the executor's status is final; nothing to grade
        task = await self._task(ex.task)
        return apply_result(body, await self._grade_object(run_id, task, ex))

    async def _grade_load(self, run_id: str, body: pb.NodeGraded) -> pb.NodeGraded:
        """A load task's node: `ok`, scored from its completion's bytes, whatever its script did
        (the executor's status stays on its node.executed). Costs one direct get of the node's
        node.sampled per node (node.executed carries nothing derived from the completion)."""
        assert self.bus is not None
        sampled = await self.bus.last_event(run_id, Kind.NODE_SAMPLED, body.node_id)
        if sampled is None:
            raise NodeSampledLost(f"node.sampled of {body.node_id} is not on the log")
        score = completion_score(sampled.node_sampled.raw_completion)
        body.status, body.is_buggy, body.source = Status.OK, False, LOAD_SOURCE
        body.test_metric = body.oriented = score
        return body

    async def _task(self, task_id: str) -> Task:
        try:
            return await asyncio.to_thread(self.registry.get, task_id)
        except (UnknownTask, UnsupportedCompetition) as exc:
            raise TransientError(str(exc), self.config.unknown_task_retry_s) from exc

    async def _grade_object(self, run_id: str, task: Task, ex: pb.NodeExecuted) -> GradeResult:
        assert self.bus is not None and self._scratch is not None
        if not ex.submission_key:
            raise SubmissionLost("the executor reported status ok but stored no submission")
        size = await self.bus.object_size(SUBMISSIONS, ex.submission_key)
        if size is None:
            raise SubmissionLost(f"submission object {ex.submission_key!r} is missing from {SUBMISSIONS}")
        try:
            check_size(size, self.config.max_submission_bytes)  # before any download
        except InvalidSubmission as exc:
            return _invalid(exc.reason)
        path = self._scratch / f"{run_id}-{ex.node_id}.csv"
        try:
            await self.bus.get_object(SUBMISSIONS, ex.submission_key, dest=path)
            return await asyncio.to_thread(grade_submission, task, path, self.config.max_submission_bytes)
        except AnswersUnavailable as exc:
            raise TransientError(str(exc), self.config.unknown_task_retry_s) from exc
        finally:
            path.unlink(missing_ok=True)


def _invalid(reason: str) -> GradeResult:
    return GradeResult(Status.INVALID_SUBMISSION, None, None, reason, 0.0)
