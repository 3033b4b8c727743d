"""The executor service: `node.sampled` in, the script run in a sandbox, `node.executed` out.

Per node: skip it if its `node.executed` already exists (a redelivery after a crash), wait for it
instead if this executor is still running it (a redelivery after the executor was frozen past its
ack wait: running it again would share its workspace and record two outcomes), read the
run's RunSpec (cached) for `resource_gate`, judge the PEP 723 declaration, run the script on the
backend, store the submission in `tg-submissions` at `<run>/<node>/submission.csv`, then publish
the fact (its id `<run>.node.executed.<node>` makes a republish a no-op). Ack comes after all that.
A `node.retried` (`treegrpo run --resume --retry-masked`: the node's newest attempt was masked) runs
the node's recorded `node.sampled` again as that attempt: its `node.executed` and submission are
keyed by the attempt (`events.attempt_key`), beside the masked attempt's, which stay as history.
A script's failure is a status; our own failures (sandbox, workspace, object store) are retried
`infra.attempts` times, then the node is recorded with status `infrastructure` (masked out of its
group: treegrpo/fault_policy.py), and `infra.fail_after` such nodes in a row stop the run: this executor
cannot run scripts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Protocol

from opentelemetry import trace

from treegrpo import events
from treegrpo.bus import SUBMISSIONS, ConsumerOptions, Delivery, PermanentError, TransientError
from treegrpo.config import RunSpec
from treegrpo.events import INFRASTRUCTURE, Kind
from treegrpo.fault_policy import FaultStreak, retry_or_give_up
from treegrpo.respend import round_steps
from treegrpo.service import Service
from treegrpo.v1 import events_pb2 as pb
from treegrpo_executor._gate import Declaration, parse_declaration
from treegrpo_executor._host import SandboxError
from treegrpo_executor._local import LocalBackend
from treegrpo_executor._outcome import NO_CODE, Job, Limits, Outcome
from treegrpo_executor._workspace import WorkspaceError
from treegrpo_executor.config import ExecutorConfig

log = logging.getLogger(__name__)


class Backend(Protocol):
    name: str

    async def start(self) -> None: ...
    async def run(self, job: Job) -> Outcome: ...
    async def close(self) -> None: ...


def make_backend(cfg: ExecutorConfig) -> Backend:
    if cfg.backend == "k8s":
        from treegrpo_executor._k8s import K8sBackend  # the kubernetes client only where it is used

        return K8sBackend(cfg)
    reader = None
    if cfg.local.gpu_devices and cfg.gpu_guard.enabled:
        from treegrpo_executor._gpu import NvmlReader

        reader = NvmlReader()
    return LocalBackend(cfg, reader)


class ExecutorService(Service):
    name = "executor"
    config_cls = ExecutorConfig

    def __init__(self, config: ExecutorConfig, instance: str | None = None, backend: Backend | None = None):
        super().__init__(config, instance)
        self.cfg: ExecutorConfig = config
        self.backend = backend
        self._specs: dict[str, RunSpec] = {}
        self._handling: set[asyncio.Task] = set()  # the tasks inside a handler now (on_stop waits for them)
        self._executing: dict[tuple[str, str], asyncio.Future] = {}  # (run, node) -> its one execution
        self.streak = FaultStreak(config.infra.fail_after)  # nodes lost to our faults in a row

    def handlers(self):
        return {Kind.NODE_SAMPLED: self.on_node_sampled, Kind.NODE_RETRIED: self.on_node_retried}

    def consumer_options(self) -> ConsumerOptions:
        # a script runs up to timeout_s; the consumer's heartbeat keeps the message ours meanwhile
        return ConsumerOptions(max_inflight=self.cfg.max_concurrency, ack_wait_s=self.cfg.ack_wait_s)

    async def on_setup(self) -> None:
        if self.backend is None:
            self.backend = make_backend(self.cfg)
        await self.backend.start()

    async def on_stop(self) -> None:
        """Kill what still runs and let the handlers clean up (sandboxes reaped, workspaces and pods
        removed) before the bus closes. Their messages stay unacked: they come back after
        `ack_wait_s` to whichever executor runs next."""
        if self.backend is not None:
            await self.backend.close()
        if self._handling:
            await asyncio.wait(self._handling, timeout=10)

    async def run_spec(self, run_id: str) -> RunSpec:
        spec = self._specs.get(run_id)
        if spec is None:
            try:
                start = await self.bus.run_start(run_id)
            except ValueError as exc:  # the recorded spec does not validate, or is another run's
                raise PermanentError(f"run {run_id}: bad run spec: {exc}") from exc
            if start is None:
                raise TransientError(f"run {run_id} has no run.started yet", delay_s=2.0)
            spec = self._specs[run_id] = start.spec
        return spec

    async def on_node_sampled(self, event: pb.Event, delivery: Delivery) -> None:
        ns, run_id = event.node_sampled, event.envelope.run_id
        misfit = events.misderived(run_id, ns) or outside(await self.run_spec(run_id), ns)
        if misfit:  # no sampler of ours wrote it: running it would add a node to the run
            raise PermanentError(f"not a node of run {run_id}: {misfit}")
        await self._handle(run_id, ns, delivery, 1)

    async def on_node_retried(self, event: pb.Event, delivery: Delivery) -> None:
        """Run a masked node again, as the attempt the runner asked for."""
        nr, run_id = event.node_retried, event.envelope.run_id
        misfit = events.misderived(run_id, nr)
        if misfit:
            raise PermanentError(f"not a retry of a node of run {run_id}: {misfit}")
        last = events.attempt_key(nr.node_id, nr.attempt - 1)
        before = await self.bus.last_event(run_id, Kind.NODE_GRADED, last)
        if before is None or before.node_graded.status != INFRASTRUCTURE:  # only a masked attempt is retried
            why = f"retry {nr.attempt} of {nr.node_id}: its attempt {nr.attempt - 1} is not masked"
            raise PermanentError(why)
        sampled = await self.bus.last_event(run_id, Kind.NODE_SAMPLED, nr.node_id)
        if sampled is None:  # ids derive, but the node was never sampled: nothing to run
            raise PermanentError(f"retry of node {nr.node_id}: it has no node.sampled in run {run_id}")
        ns = sampled.node_sampled
        misfit = outside(await self.run_spec(run_id), ns)
        if misfit:
            raise PermanentError(f"not a node of run {run_id}: {misfit}")
        log.info("node %s: attempt %d (retrying a masked node: %s)", nr.node_id, nr.attempt, nr.reason[:200])
        await self._handle(run_id, ns, delivery, nr.attempt)

    async def _handle(self, run_id: str, ns: pb.NodeSampled, delivery: Delivery, attempt: int) -> None:
        # the consumer's workers are long-lived tasks that run one handler after another: a task
        # counts as handling only inside this call (a done-callback per node piled up on the worker
        # forever, each with a copy of the context and so the node's span: issue 32's 4 KB a node)
        me = asyncio.current_task()
        if me is not None:
            self._handling.add(me)
        try:
            await self._handle_once(run_id, ns, delivery, attempt)
        finally:
            self._handling.discard(me)

    async def _handle_once(self, run_id: str, ns: pb.NodeSampled, delivery: Delivery, attempt: int) -> None:
        done = events.attempt_key(ns.node_id, attempt)
        if self.cfg.skip_executed and await self.bus.last_event(run_id, Kind.NODE_EXECUTED, done):
            log.info("node %s (attempt %d) already executed; not running it again", ns.node_id, attempt)
            return
        key = (run_id, ns.node_id)  # one execution of a node at a time, whatever its attempt: one workspace
        if key in self._executing:
            await self._join(run_id, ns.node_id, attempt, self._executing[key])
            return
        self._executing[key] = asyncio.get_running_loop().create_future()
        try:
            await self._run_node(ns, run_id, delivery, attempt)
        finally:
            self._executing.pop(key).set_result(None)

    async def _join(self, run_id: str, node_id: str, attempt: int, running: asyncio.Future) -> None:
        """A redelivery of a node this executor is still running: its outcome is the one recorded."""
        log.warning("node %s redelivered while it still runs here; waiting for that execution", node_id)
        await asyncio.shield(running)
        if not await self.bus.last_event(run_id, Kind.NODE_EXECUTED, events.attempt_key(node_id, attempt)):
            raise TransientError(f"the running execution of {node_id} recorded no outcome", delay_s=1.0)

    async def _run_node(self, ns: pb.NodeSampled, run_id: str, delivery: Delivery, attempt: int) -> None:
        gate = (await self.run_spec(run_id)).resource_gate
        decl = parse_declaration(ns.code, self.cfg.gate) if gate else Declaration()
        try:
            out, key = await self._execute_and_store(run_id, ns, decl, attempt)
        except Exception as exc:  # ours, not the script's (cancellation is no Exception: it naks)
            if self.stopping.is_set():  # killed by our own shutdown: it simply runs again later
                raise TransientError(f"executor stopping while {ns.node_id} ran", 1.0) from exc
            fault = retry_or_give_up(
                delivery, self.cfg.infra.attempts, f"executing {ns.node_id}", exc, self.cfg.infra.retry_s
            )
            await self._record_fault(run_id, ns, decl, gate, fault, exc, attempt)
            return
        await self.publish(run_id, executed_body(ns, out, decl, gate, key, attempt))
        self.streak.ok()
        span = trace.get_current_span()
        span.set_attribute("treegrpo.node_id", ns.node_id)
        span.set_attribute("treegrpo.status", out.status)
        span.set_attribute("treegrpo.exec_time", out.exec_time)
        log.info(
            "node %s %s %s%s in %.2fs on %s",
            ns.node_id,
            ns.mode,
            out.status,
            f" ({out.exc_type})" if out.exc_type else "",
            out.exec_time,
            out.where or "-",
        )

    async def _execute_and_store(
        self, run_id: str, ns: pb.NodeSampled, decl: Declaration, attempt: int = 1
    ) -> tuple[Outcome, str]:
        out = await self.execute(run_id, ns, decl)
        key = ""
        if out.submission is not None:  # a retry's beside the first attempt's (kept as history)
            key = f"{run_id}/{ns.node_id}/{'' if attempt <= 1 else f'a{attempt}/'}submission.csv"
            try:
                await self.bus.put_object(SUBMISSIONS, key, out.submission)
            except Exception as exc:  # the store is ours: retry the node rather than lose its result
                raise TransientError(f"storing {key}: {type(exc).__name__}: {exc}", delay_s=2.0) from exc
        return out, key

    async def _record_fault(
        self,
        run_id: str,
        ns: pb.NodeSampled,
        decl: Declaration,
        gate: bool,
        fault: str,
        exc: Exception,
        attempt: int,
    ) -> None:
        """The node's last attempt failed on our side: record it masked, and stop if nothing works."""
        cause = exc.__cause__ if isinstance(exc, TransientError) and exc.__cause__ else exc
        out = Outcome(status=INFRASTRUCTURE, exc_type=type(cause).__name__, term_tail=fault)
        await self.publish(run_id, executed_body(ns, out, decl, gate, "", attempt))
        log.error("node %s masked as an infrastructure fault: %s", ns.node_id, fault)
        self.note_error(fault)
        if self.streak.fault(fault):
            self.fail(self.streak.message("executor", "run scripts"))

    async def execute(self, run_id: str, ns: pb.NodeSampled, decl: Declaration) -> Outcome:
        if not ns.code.strip():
            return Outcome(status=NO_CODE)
        job = Job(
            run_id=run_id,
            node_id=ns.node_id,
            task=ns.task,
            code=ns.code,
            limits=Limits.for_node(decl, self.cfg),
        )
        try:
            return await self.backend.run(job)
        except (SandboxError, WorkspaceError) as exc:
            raise TransientError(f"sandbox failed for {ns.node_id}: {exc}", delay_s=1.0) from exc


def outside(spec: RunSpec, ns: pb.NodeSampled) -> str:
    """Why a node lies outside its run's tree ('' if it does not): a task, round or step the run has not."""
    if ns.task not in spec.tasks:
        return f"task {ns.task!r} is not one of the run's {spec.tasks}"
    steps = round_steps(spec.tree.expansions, spec.tree.respend.enabled)  # re-spent groups included
    if not 1 <= ns.round <= spec.rounds or ns.step >= steps:
        return f"round {ns.round} step {ns.step} is outside {spec.rounds} round(s) of {steps} step(s)"
    return ""


def executed_body(
    ns: pb.NodeSampled, out: Outcome, decl: Declaration, gate: bool, key: str, attempt: int = 1
) -> pb.NodeExecuted:
    body = pb.NodeExecuted(
        node_id=ns.node_id,
        task=ns.task,
        round=ns.round,
        step=ns.step,
        sibling_group=ns.sibling_group,
        group_size=ns.group_size,
        mode=ns.mode,
        status=out.status,
        exec_time=round(out.exec_time, 4),
        term_tail=out.term_tail,
        resource_gate=gate,
        decl_malformed=decl.malformed,
        decl_deps_ignored=decl.deps_ignored,
        where=out.where,
        submission_key=key,
        attempt=attempt if attempt > 1 else 0,  # 0: the first, as every node before retries was
    )
    if ns.HasField("parent_id"):
        body.parent_id = ns.parent_id
    if out.exc_type:
        body.exc_type = out.exc_type
    if gate and decl.resources is not None:
        body.resources.CopyFrom(pb.Resources(**{k: float(v) for k, v in decl.resources.items()}))
    if gate and decl.miss_reason:
        body.decl_miss_reason = decl.miss_reason
    if out.status not in (NO_CODE, INFRASTRUCTURE):
        body.exec_timings.CopyFrom(
            pb.ExecTimings(**{k: round(v, 4) for k, v in dataclasses.asdict(out.timings).items()})
        )
    if out.gpu_util is not None:
        body.gpu_util = out.gpu_util
    return body
