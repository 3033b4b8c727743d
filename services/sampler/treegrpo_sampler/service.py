"""SamplerService: grows every task's tree per round and samples its nodes.

Handlers fold the facts the sampler depends on (`run.started`, `group.scored`,
`policy.published`, `run.completed`) into per-run state; a separate pump task turns that state
into work through the pure tree policy and samples up to `max_concurrent_groups` groups at once,
so the consumer keeps acking and heartbeating while the model generates (`_group.GroupSampler`
samples one group and publishes its facts). On the first event of a
run the state is rebuilt by replaying the run's log, so a restarted sampler resumes exactly where
the log says it was: half-sampled groups get only their missing siblings (deterministic node ids
make any re-publish a no-op), and a policy version published while it was down is pulled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from treegrpo.bus import ConsumerOptions, Delivery, PermanentError, TransientError
from treegrpo.config import treegrpo_home
from treegrpo.events import Kind
from treegrpo.service import Service
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import _respend, _rounds
from treegrpo_sampler._adapters import AdapterLoader
from treegrpo_sampler._checks import check_adapter, check_attempt, check_group, require_started
from treegrpo_sampler._gate import VersionGate
from treegrpo_sampler._group import GroupSampler
from treegrpo_sampler._schedule import Scheduler
from treegrpo_sampler._state import REPLAY_KINDS, RunState
from treegrpo_sampler._weights import WeightReceiver, serve_weights
from treegrpo_sampler.backends import EngineLost, create_backend, resolve_model_path
from treegrpo_sampler.config import SamplerConfig
from treegrpo_sampler.policy import next_expansions, nothing_to_sample

log = logging.getLogger(__name__)


class SamplerService(Service):
    name = "sampler"
    config_cls = SamplerConfig
    config: SamplerConfig

    def __init__(self, config: SamplerConfig, instance: str | None = None):
        super().__init__(config, instance)
        self.backend = None
        self.gate = VersionGate()
        self.loader: AdapterLoader | None = None
        self.receiver: WeightReceiver | None = None
        self.runs: dict[str, RunState] = {}
        self._run_lock = asyncio.Lock()
        self.scheduler = Scheduler(config.max_concurrent_groups)
        self.groups: GroupSampler | None = None  # samples one group (made once the backend is up)
        self._pump_task: asyncio.Task | None = None
        self._foreign_warned: set[str] = set()

    @property
    def groups_sampled(self) -> int:
        """Groups this sampler sampled and published since it started."""
        return self.groups.sampled if self.groups else 0

    @property
    def weights_address(self) -> str:
        """host:port of the gRPC weight receiver (what the learner pushes adapters to)."""
        return self.receiver.address if self.receiver else ""

    @property
    def model_name(self) -> str:
        return str(resolve_model_path(self.config))

    def handlers(self):
        return {
            Kind.RUN_STARTED: self.on_run_started,
            Kind.RUN_COMPLETED: self.on_run_completed,
            Kind.RUN_ENDED: self.on_run_completed,
            Kind.RUN_RESUMED: self.on_run_resumed,
            Kind.GROUP_SCORED: self.on_group_scored,
            Kind.POLICY_PUBLISHED: self.on_policy_published,
        }

    def consumer_options(self) -> ConsumerOptions:
        return ConsumerOptions(max_inflight=8, ack_wait_s=60.0)

    # ---- lifecycle --------------------------------------------------------------------------
    async def on_setup(self) -> None:
        self.backend = await asyncio.to_thread(create_backend, self.config)
        self.groups = GroupSampler(
            self.backend, self.gate, self.bus, self.config, self.producer, self.instance, self.tracer
        )
        workdir = (
            Path(self.config.workdir).expanduser() if self.config.workdir else treegrpo_home() / "sampler"
        )
        self.loader = AdapterLoader(
            self.backend,
            self.bus,
            self.gate,
            self.instance,
            workdir / "adapters",
            self.producer,
            self.config.grpc.published_wait_s,
            on_engine_lost=self.fail,
        )
        self.receiver = await serve_weights(self.loader, self.config.grpc, workdir, self.instance)
        log.info("sampler %s: backend %s", self.instance, self.backend.name)
        self._pump_task = asyncio.create_task(self._pump())
        await self._resume_open_runs()

    async def _resume_open_runs(self) -> None:
        """After a restart the facts that would wake us may all be acked already: look for open
        runs (ours alone when scoped to one). A run whose last attempt ended (stopped, failed,
        completed) is never picked up again until `treegrpo run --resume` reopens it."""
        for run_id in [self.run_id] if self.run_id else await self.bus.run_ids():
            if not (await self.bus.run_ends(run_id)).open:
                continue
            try:
                await self.ensure_run(run_id)
            except ValueError as exc:  # one bad run.started on the stream must not stop a restart
                if self.run_id:  # of the run this sampler serves: nothing it can do (permanent)
                    raise
                log.error("run %s: not resumed, its run.started is bad: %s", run_id, exc)

    def abandon(self) -> None:
        """Cancel the pump and every group and pull without waiting (an in-process stand-in for a
        killed sampler: nothing drains, nothing is acked)."""
        if self._pump_task is not None:
            self._pump_task.cancel()
        self.scheduler.cancel()

    async def on_stop(self) -> None:
        if self._pump_task is not None:
            self._pump_task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(
                *[t for t in [self._pump_task] if t], self.scheduler.cancel_all(), return_exceptions=True
            )
        if self.receiver is not None:
            await self.receiver.stop()
        if self.backend is not None:
            await self.backend.close()

    # ---- handlers: fold facts, wake the pump ------------------------------------------------
    async def ensure_run(self, run_id: str) -> RunState | None:
        """The run's state, rebuilt from its log on first sight (None: no run.started yet)."""
        async with self._run_lock:
            if run_id in self.runs:
                return self.runs[run_id]
            started = await self.bus.run_start(run_id)
            if started is None or started.imported:
                return None  # not started yet, or history read back from an archive: never work to redo
            state = RunState(run_id, started.spec)
            async for _, event in self.bus.replay(run_id, REPLAY_KINDS):
                state.apply(event)
            self.runs[run_id] = state
            log.info("run %s: rebuilt from the log (%d nodes sampled)", run_id, len(state.nodes))
        await self._catch_up(state)
        for rs in list(state.rounds.values()):
            await self._respend(state, rs)  # a crash may have come between the scores and the decisions
            await self._maybe_complete_round(state, rs)
        self.scheduler.wake()
        return state

    async def on_run_started(self, event: pb.Event, delivery: Delivery) -> None:
        try:
            await self.ensure_run(event.envelope.run_id)
        except ValueError as exc:  # the RunSpec JSON does not validate: nothing a retry can fix
            raise PermanentError(f"bad run spec: {exc}") from exc

    async def on_run_completed(self, event: pb.Event, delivery: Delivery) -> None:
        """run.completed or run.ended: stop sampling the run (groups in flight finish)."""
        if event.HasField("run_ended"):
            await check_attempt(self.bus, event)
        state = self.runs.get(event.envelope.run_id)
        if state is not None:
            state.apply(event)
        else:
            await require_started(self.bus, event.envelope.run_id)

    async def on_run_resumed(self, event: pb.Event, delivery: Delivery) -> None:
        await check_attempt(self.bus, event)
        state = self.runs.get(event.envelope.run_id)
        if state is None:
            await require_started(self.bus, event.envelope.run_id)
            await self.ensure_run(event.envelope.run_id)
            return
        state.apply(event)
        await self._catch_up(state)
        self.scheduler.wake()

    async def on_group_scored(self, event: pb.Event, delivery: Delivery) -> None:
        check_group(event.envelope.run_id, event.group_scored)
        state = await self.ensure_run(event.envelope.run_id)
        if state is None:
            raise TransientError("group scored before its run.started is visible", 2.0)
        state.apply(event)
        body = event.group_scored
        await self._respend(state, state.round(body.task, body.round))
        await self._maybe_complete_round(state, state.round(body.task, body.round))
        self.scheduler.wake()

    async def on_policy_published(self, event: pb.Event, delivery: Delivery) -> None:
        state = await self.ensure_run(event.envelope.run_id)
        if state is None:
            raise TransientError("policy published before its run.started is visible", 2.0)
        await check_adapter(
            self.bus, self.config.grpc.max_adapter_bytes, event.envelope.run_id, event.policy_published
        )
        state.apply(event)
        self._schedule_pull(state, event.policy_published, self.config.grpc.pull_after_s)

    # ---- weights: pull a version no push brought --------------------------------------------
    async def _catch_up(self, state: RunState) -> None:
        latest = state.latest_published()
        if latest is not None and latest.version > self.backend.version and not state.completed:
            self._schedule_pull(state, latest, 0.0)

    def _schedule_pull(self, state: RunState, published: pb.PolicyPublished, after_s: float) -> None:
        if published.version > self.backend.version:
            key = (state.run_id, published.version)
            self.scheduler.pull(key, lambda: self._pull_later(state, published, after_s))

    async def _pull_later(self, state: RunState, published: pb.PolicyPublished, after_s: float) -> None:
        def stop() -> bool:
            return self.stopping.is_set() or state.completed

        retry_s = self.config.grpc.pull_after_s
        await self.loader.pull_when_due(state.run_id, published, after_s, retry_s, stop)
        self.scheduler.wake()

    # ---- rounds -----------------------------------------------------------------------------
    async def _respend(self, state: RunState, rs) -> None:
        """Once the round's expansions are scored: record a decision per zero-variance group."""
        tokens = self.config.sampling.max_new_tokens  # what one new sibling reserves of the budget
        if not state.completed and await _respend.record(self.bus, state, rs, tokens, self.producer):
            self.scheduler.wake()

    async def _maybe_complete_round(self, state: RunState, rs) -> None:
        await _rounds.complete_round(self.publish, state, rs, self.config.publish_run_completed)

    # ---- the pump: state -> work ------------------------------------------------------------
    async def _pump(self) -> None:
        while not self.stopping.is_set():
            await self.scheduler.wait(1.0)
            # runs take turns: the one served longest ago first, each with its share of the slots
            runs, share = self.scheduler.turns(self.runs.values())
            for state in runs:
                if self._launch(state, share):
                    self.scheduler.served(state.run_id)
            await self._maybe_sleep(runs)

    async def _maybe_sleep(self, runs: list[RunState]) -> None:
        """A colocated engine releases the GPU once no open run has a round to sample (policy.py;
        never between a round's expansions, which wait only for the executor and grader)."""
        sleep = getattr(self.backend, "sleep", None)
        if sleep is None or self.scheduler.in_flight or not runs or getattr(self.backend, "asleep", False):
            return
        if self.loader is not None and self.loader.loading:  # woken ahead of a version on its way in
            return
        version = self.backend.version
        if all(nothing_to_sample(s.spec, s.rounds, version) for s in runs):
            await sleep(version)  # refused if a load made another version current meanwhile

    def _launch(self, state: RunState, share: int) -> int:
        """Start up to `share` of the free slots' groups for this run; how many started."""
        free = self.scheduler.free(share)
        if free <= 0:
            return 0
        version = self._version_for(state)
        if version is None:
            return 0
        todo = next_expansions(state.run_id, state.spec, state.rounds, version, self.scheduler.held())
        for exp in todo[:free]:
            self.scheduler.start(exp.group_id, self.groups.sample(state, exp), self._done)
        return len(todo[:free])

    def _version_for(self, state: RunState) -> int | None:
        """The version this run may be sampled with; None while another run's adapter is loaded."""
        if self.backend.version == 0 or self.loader.serving_run == state.run_id:
            return self.backend.version
        if state.run_id not in self._foreign_warned:
            self._foreign_warned.add(state.run_id)
            log.error(
                "run %s waits: this sampler serves run %s's adapter v%d (one training run per sampler; "
                "restart it to switch runs)",
                state.run_id,
                self.loader.serving_run,
                self.backend.version,
            )
        return None

    def _done(self, group_id: str, task: asyncio.Task) -> None:
        if not task.cancelled() and isinstance(task.exception(), EngineLost):
            self.fail(str(task.exception()))  # every run this engine serves waits on it: stop, say why
        elif not task.cancelled() and isinstance(task.exception(), FileNotFoundError) and self.run_id:
            # a task the run names is nowhere to be found: no retry brings it, and this sampler
            # serves that one run, so stop it with the reason (an unscoped one keeps serving others)
            self.fail(f"group {group_id}: {task.exception()}")
        elif not task.cancelled() and task.exception() is not None:
            log.error(
                "group %s failed: %r; retrying in %.0fs", group_id, task.exception(), self.scheduler.retry_s
            )
            self.note_error(f"group {group_id}: {type(task.exception()).__name__}: {task.exception()}")
            self.scheduler.retry_later(group_id)
