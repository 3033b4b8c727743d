"""Parse one JSON value of the seed's archive into its typed record, or say exactly what is wrong."""

from __future__ import annotations

from typing import Any

from treegrpo.archive._schema import (
    EXEC_TIMING_KEYS,
    GATE_KEYS,
    GATE_NODE_KEYS,
    NODE_KEYS,
    PHASES,
    RESOURCE_KEYS,
    SUMMARY_KEYS,
    ChatMessage,
    GateNodeRecord,
    NodeRecord,
    RoundSummary,
    TimingLine,
)


class RecordError(ValueError):
    """A line or file of the archive does not have the seed's shape."""


def _str(d: dict, k: str, nullable: bool = False) -> str | None:
    v = d[k]
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        raise RecordError(f"{k} must be a string{' or null' if nullable else ''}, got {type(v).__name__}")
    return v


def _int(d: dict, k: str) -> int:
    v = d[k]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise RecordError(f"{k} must be a non-negative integer, got {v!r}")
    return v


def _num(d: dict, k: str, nullable: bool = False) -> float | None:
    v = d[k]
    if v is None and nullable:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RecordError(f"{k} must be a number{' or null' if nullable else ''}, got {v!r}")
    return float(v)


def _bool(d: dict, k: str) -> bool:
    if not isinstance(d[k], bool):
        raise RecordError(f"{k} must be true or false, got {d[k]!r}")
    return d[k]


def _keys(d: Any, required: tuple[str, ...], what: str) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{what} must be a JSON object")
    missing = [k for k in required if k not in d]
    if missing:
        raise RecordError(f"{what} lacks key(s) {', '.join(missing)}")


def _messages(v: Any) -> list[ChatMessage]:
    if not isinstance(v, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in v
    ):
        raise RecordError("prompt_messages must be a list of {role, content} strings")
    return [ChatMessage(m["role"], m["content"]) for m in v]


def _numbers(v: Any, k: str, ints: bool) -> list:
    """Type-check a token list in C (`map(type, ...)`): per-element Python checks would dominate import."""
    if not isinstance(v, list):
        raise RecordError(f"{k} must be a list")
    types = set(map(type, v))
    if ints:
        if not types <= {int} or (v and (min(v) < 0 or max(v) >= 1 << 32)):
            raise RecordError(f"{k} must hold only integers in 0..2^32-1")
        return v
    if not types <= {float, int}:
        raise RecordError(f"{k} must hold only numbers")
    return [float(x) for x in v] if int in types else v


def _num_map(v: Any, k: str, allowed: tuple[str, ...]) -> dict | None:
    if v is None:
        return None
    if not isinstance(v, dict) or not set(v) <= set(allowed):
        raise RecordError(f"{k} must be null or an object with keys among {', '.join(allowed)}")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v.values()):
        raise RecordError(f"{k} values must be numbers")
    return {key: v[key] for key in allowed if key in v}


def parse_node(d: Any) -> NodeRecord:
    _keys(d, NODE_KEYS, "node record")
    gate = any(k in d for k in GATE_KEYS)
    if gate:
        _keys(d, GATE_NODE_KEYS, "32-key node record")
    extra = set(d) - set(GATE_NODE_KEYS if gate else NODE_KEYS)
    if extra:
        raise RecordError(f"unknown key(s) {', '.join(sorted(extra))}")
    cls = GateNodeRecord if gate else NodeRecord
    rec = cls(
        id=_str(d, "id"),
        step=_int(d, "step"),
        round=_int(d, "round"),
        exp_id=_str(d, "exp_id"),
        parent_id=_str(d, "parent_id", True),
        sibling_group=_str(d, "sibling_group"),
        mode=_str(d, "mode"),
        plan=_str(d, "plan"),
        code=_str(d, "code"),
        raw_completion=_str(d, "raw_completion"),
        thinking=_str(d, "thinking"),
        prompt_messages=_messages(d["prompt_messages"]),
        response_token_ids=_numbers(d["response_token_ids"], "response_token_ids", True),
        response_logprobs=_numbers(d["response_logprobs"], "response_logprobs", False),
        exc_type=_str(d, "exc_type", True),
        exec_time=_num(d, "exec_time"),
        term_tail=_str(d, "term_tail"),
        is_buggy=_bool(d, "is_buggy"),
        status=_str(d, "status"),
        grade_error=_str(d, "grade_error", True),
        test_metric=_num(d, "test_metric", True),
        oriented=_num(d, "oriented", True),
        reward=_num(d, "reward", True),
        source=_str(d, "source", True),
        n_children=_int(d, "n_children"),
    )
    if gate:
        _parse_gate(rec, d)
    return rec


def _parse_gate(rec: GateNodeRecord, d: dict) -> None:
    rec.resources = _num_map(d["resources"], "resources", RESOURCE_KEYS)
    rec.decl_malformed = _bool(d, "decl_malformed")
    rec.decl_miss_reason = _str(d, "decl_miss_reason", True)
    rec.decl_deps_ignored = _bool(d, "decl_deps_ignored")
    rec.where = _str(d, "where", True)
    timings = _num_map(d["exec_timings"], "exec_timings", EXEC_TIMING_KEYS)
    rec.exec_timings = None if timings is None else {k: float(v) for k, v in timings.items()}
    rec.gpu_util = _num(d, "gpu_util", True)


def parse_summary(d: Any) -> RoundSummary:
    _keys(d, SUMMARY_KEYS, "round summary")
    return RoundSummary(
        exp_id=_str(d, "exp_id"),
        round=_int(d, "round"),
        model=_str(d, "model"),
        adapter_path=_str(d, "adapter_path"),
        nodes=_int(d, "nodes"),
        valid=_int(d, "valid"),
        expansions=_int(d, "expansions"),
        phase=_str(d, "phase"),
        best_test_metric=_num(d, "best_test_metric", True),
        best_node_id=_str(d, "best_node_id", True),
        honest_test_metric=_num(d, "honest_test_metric", True),
        rollout_file=_str(d, "rollout_file"),
        workspace=_str(d, "workspace"),
        gen_llm_seconds=_num(d, "gen_llm_seconds"),
        gen_exec_seconds=_num(d, "gen_exec_seconds"),
    )


def parse_timing(d: Any) -> TimingLine:
    _keys(d, ("step", "total_s", "phases_s"), "timing line")
    phases = _num_map(d["phases_s"], "phases_s", PHASES)
    if phases is None:
        raise RecordError("phases_s must be an object")
    return TimingLine(
        step=_int(d, "step"), total_s=_num(d, "total_s"), phases_s={k: float(v) for k, v in phases.items()}
    )
