"""One expansion, end to end: its prompt, its G completions, their `tokens.recorded` and
`node.sampled` facts."""

from __future__ import annotations

import time
from dataclasses import dataclass

from treegrpo import events
from treegrpo.bus import Bus
from treegrpo.events import Kind, Status
from treegrpo.prompts import PromptSettings, TaskContext, render_prompt
from treegrpo.retries import newest_attempt
from treegrpo.v1 import events_pb2 as pb
from treegrpo_sampler._parse import parse_completion
from treegrpo_sampler._state import RunState
from treegrpo_sampler.backends import Completion
from treegrpo_sampler.policy import Expansion


@dataclass(frozen=True)
class Sampled:
    completions: list[Completion]
    version: int
    seconds: float


async def parent_output(bus: Bus, run_id: str, parent_id: str) -> str:
    """The parent's terminal tail as the executor recorded it (trimmed at render time), of its
    newest attempt (a parent retried after an infrastructure fault: the retry's)."""
    attempt = await newest_attempt(bus, run_id, parent_id)
    executed = await bus.last_event(run_id, Kind.NODE_EXECUTED, events.attempt_key(parent_id, attempt))
    if executed is None:
        return ""
    body = executed.node_executed
    tail = body.term_tail
    if body.status != Status.OK and body.HasField("exc_type") and body.exc_type and body.exc_type not in tail:
        tail = f"{tail}\n[{body.status}: {body.exc_type}]"
    elif body.status not in (Status.OK, Status.CRASHED):
        tail = f"{tail}\n[{body.status}]"
    return tail


async def prompt_for(
    bus: Bus, state: RunState, exp: Expansion, ctx: TaskContext, settings: PromptSettings
) -> list[dict[str, str]]:
    code = output = None
    if exp.parent_id is not None:
        parent = state.nodes.get(exp.parent_id)
        code = parent.code if parent else ""
        output = await parent_output(bus, state.run_id, exp.parent_id)
    return render_prompt(
        exp.mode,
        ctx.description,
        ctx.data_overview,
        code,
        output,
        gpu_hint=settings.gpu_hint,
        show_scores=settings.show_scores,
        time_limit_s=settings.time_limit_s,
        template_dir=settings.template_dir or None,
    )


def sampling_seed(state: RunState, exp: Expansion) -> int:
    """Seeded per group position and per missing set: a re-sample after a crash is reproducible too.
    The run id is left out on purpose: a train arm and its no-train control with one `run.seed`
    sample the same round 1 token for token (the comparison's round-1 agreement check)."""
    seed = events.short_hash("sample", state.spec.seed, exp.task, exp.round, exp.step, exp.missing, n=8)
    return int(seed, 16) % (2**31)


def node_events(
    state: RunState,
    exp: Expansion,
    messages: list[dict[str, str]],
    sampled: Sampled,
    producer: str,
    sampler_id: str,
    model: str,
) -> list[pb.Event]:
    """Each completion's two facts, its `tokens.recorded` right before its `node.sampled`: published
    in this order on one connection, a node fact is never on the stream before its payload."""
    g = exp.group_size or state.spec.tree.group_size
    share = sampled.seconds / max(1, len(sampled.completions))
    prompt = [pb.ChatMessage(role=m["role"], content=m["content"]) for m in messages]
    out = []
    for index, comp in zip(exp.missing, sampled.completions, strict=True):
        parsed = parse_completion(comp.text)
        place = dict(
            node_id=events.node_id(state.run_id, exp.task, exp.round, exp.step, index),
            task=exp.task,
            round=exp.round,
            step=exp.step,
            sibling_group=exp.group_id,
            group_size=g,
            index_in_group=index,
        )
        tokens = pb.TokensRecorded(
            **place,
            prompt_messages=prompt,
            prompt_token_ids=comp.prompt_token_ids,
            response_token_ids=comp.token_ids,
            response_logprobs=comp.logprobs,
        )
        body = pb.NodeSampled(
            **place,
            mode=exp.mode,
            raw_completion=comp.text,
            thinking=parsed.thinking,
            plan=parsed.plan,
            code=parsed.code,
            policy_version=sampled.version,
            gen_seconds=share,
            sampler_id=sampler_id,
            model=model,
            finish_reason=comp.finish_reason,  # "length": cut at max_new_tokens (the learner's overlong rule)
            tokens_recorded=True,  # its payload is the fact before it
            tokens_digest=events.tokens_digest(tokens),  # ... that one, not another sampling's
        )
        if exp.parent_id is not None:
            body.parent_id = exp.parent_id
        at = time.time()
        out += [events.make_event(state.run_id, producer, b, at=at) for b in (tokens, body)]
    return out
