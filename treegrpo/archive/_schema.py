"""The seed's archive records as typed values, their key order, and their JSON bytes.

Field order of each dataclass IS the seed's key order (section 4 of the seed file): orjson writes
dataclass fields in definition order, so `NodeRecord` serialises to the 25 keys and
`GateNodeRecord` (the same 25, then the 7 resource-gate keys) to the 32 keys. JSON is compact
(orjson: no spaces, UTF-8, shortest round-trip floats), so the same values always give the same
bytes. Integral `resources` values are written as JSON integers, as the seed's archive has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import orjson

from treegrpo.events import Status

PHASES = (
    "update_weights",
    "gen",
    "old_log_prob",
    "ref",
    "adv",
    "update_actor",
    "save_checkpoint",
    # not in the seed's runs: only a learner that shares its GPU with the sampler's engine times them
    "sleep",
    "wake",
)
RESOURCE_KEYS = ("cpu", "mem", "ephemeral", "gpu")
EXEC_TIMING_KEYS = ("pending", "stage", "exec", "retrieve")
STATUSES = tuple(s.value for s in Status)  # the seed's six, in its order (plain str: JSON keys)


@dataclass(slots=True)
class ChatMessage:
    role: str
    content: str


@dataclass(slots=True)
class NodeRecord:
    """One line of `<task>__<ts>.jsonl` (the 25-key schema)."""

    id: str
    step: int
    round: int
    exp_id: str
    parent_id: str | None
    sibling_group: str
    mode: str
    plan: str = ""
    code: str = ""
    raw_completion: str = ""
    thinking: str = ""
    prompt_messages: list[ChatMessage] = field(default_factory=list)
    response_token_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    exc_type: str | None = None
    exec_time: float = 0.0
    term_tail: str = ""
    is_buggy: bool = True
    status: str = ""
    grade_error: str | None = None
    test_metric: float | None = None
    oriented: float | None = None
    reward: float | None = None
    source: str | None = None
    # A further-expansion counter: 0 on every node of the seed's archive (tree structure comes from
    # parent_id). We write 0 too, so readers of the seed's files read ours the same way.
    n_children: int = 0


@dataclass(slots=True)
class GateNodeRecord(NodeRecord):
    """The 32-key schema of runs that used the resource gate."""

    resources: dict[str, int | float] | None = None
    decl_malformed: bool = False
    decl_miss_reason: str | None = None
    decl_deps_ignored: bool = False
    where: str | None = None
    exec_timings: dict[str, float] | None = None
    gpu_util: float | None = None


NODE_KEYS = tuple(f.name for f in fields(NodeRecord))
GATE_NODE_KEYS = tuple(f.name for f in fields(GateNodeRecord))
GATE_KEYS = GATE_NODE_KEYS[len(NODE_KEYS) :]
assert len(NODE_KEYS) == 25 and len(GATE_NODE_KEYS) == 32


@dataclass(slots=True)
class RoundSummary:
    """`<task>__summary_<completed unix ts>.json`: every key of the seed's round summary, in order."""

    exp_id: str
    round: int
    model: str
    adapter_path: str
    nodes: int
    valid: int
    expansions: int
    phase: str
    best_test_metric: float | None
    best_node_id: str | None
    honest_test_metric: float | None
    rollout_file: str
    workspace: str
    gen_llm_seconds: float
    gen_exec_seconds: float


SUMMARY_KEYS = tuple(f.name for f in fields(RoundSummary))


@dataclass(slots=True)
class TimingLine:
    """One line of the run root's `timing.jsonl`; `phases_s` holds only the phases that were timed."""

    step: int
    total_s: float
    phases_s: dict[str, float]


def node_json(record: NodeRecord) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def summary_json(summary: RoundSummary) -> bytes:
    return orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def timing_json(line: TimingLine) -> bytes:
    return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)


def int_if_integral(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)
