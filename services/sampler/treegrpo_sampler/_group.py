"""Sampling one sibling group: its round's start, its prompt, its G completions and its facts.

The service's pump decides which expansion to sample (the tree policy, the scheduler's slots); this
room does the sampling of one: the round's `round.started` when it is the round's first group, the
prompt from the task's public folder and the parent's recorded code and output, one `generate` of
the missing siblings under the version gate (no swap lands mid-group), and the group's facts in one
pipelined publish (each node's `tokens.recorded` right before its `node.sampled`), folded into the
run's state once the stream holds them.
"""

from __future__ import annotations

import asyncio
import time

from opentelemetry import trace

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.prompts import TaskContext, task_context
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler import _expand
from treegrpo_sampler._gate import VersionGate
from treegrpo_sampler._state import RunState
from treegrpo_sampler.backends import SamplingParams, resolve_model_path
from treegrpo_sampler.config import SamplerConfig
from treegrpo_sampler.policy import Expansion


class GroupSampler:
    """Samples groups with one backend for one sampler instance; counts the groups it sampled."""

    def __init__(
        self,
        backend,
        gate: VersionGate,
        bus: Bus,
        config: SamplerConfig,
        producer: str,
        instance: str,
        tracer: trace.Tracer,
    ):
        self.backend, self.gate, self.bus, self.config = backend, gate, bus, config
        self.producer, self.instance, self.tracer = producer, instance, tracer
        self.model_name = str(resolve_model_path(config))  # the model a run names none of (spec.model)
        self._contexts: dict[str, TaskContext] = {}
        self.sampled = 0

    async def sample(self, state: RunState, exp: Expansion) -> None:
        # one trace per sibling group: each node's journey sampler -> executor -> grader -> learner
        # continues it through the message headers
        with self.tracer.start_as_current_span(
            "sampler sample group",
            attributes={
                "treegrpo.run_id": state.run_id,
                "treegrpo.sibling_group": exp.group_id,
                "treegrpo.task": exp.task,
                "treegrpo.round": exp.round,
            },
        ):
            await self._sample_group(state, exp)

    async def _sample_group(self, state: RunState, exp: Expansion) -> None:
        model = state.spec.model or self.model_name
        rs = state.round(exp.task, exp.round)
        if rs.started_unix is None:
            await self._start_round(state, exp, model)
        ctx = await self._context(exp.task)
        messages = await _expand.prompt_for(self.bus, state, exp, ctx, self.config.prompts)
        s = self.config.sampling
        params = SamplingParams(
            max_new_tokens=s.max_new_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=_expand.sampling_seed(state, exp),
        )
        async with self.gate.generating():  # no swap can land while this group generates
            version, started = self.backend.version, time.perf_counter()
            completions = await self.backend.generate(messages, len(exp.missing), params)
            sampled = _expand.Sampled(completions, version, time.perf_counter() - started)
        evs = _expand.node_events(state, exp, messages, sampled, self.producer, self.instance, model)
        await self.bus.publish_many(evs)
        for e in evs:
            state.apply(e)
        self.sampled += 1

    async def _start_round(self, state: RunState, exp: Expansion, model: str) -> None:
        body = pb.RoundStarted(
            task=exp.task,
            round=exp.round,
            policy_version=self.backend.version,
            model=model,
            started_unix=int(time.time()),
            expansions=state.spec.tree.expansions,
            group_size=state.spec.tree.group_size,
        )
        await self.bus.publish(events.make_event(state.run_id, self.producer, body))
        state.apply(pb.Event(round_started=body))

    async def _context(self, task: str) -> TaskContext:
        if task not in self._contexts:
            p = self.config.prompts
            self._contexts[task] = await asyncio.to_thread(
                task_context, task, p.task_roots or None, p.csv_head_lines
            )
        return self._contexts[task]
