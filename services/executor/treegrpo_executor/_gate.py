"""The resource gate: a script's PEP 723 `# /// script` block and its `[tool.resources]` table.

The four recorded fields follow the seed: `resources` (the parsed declaration, or None when there
is none or it was rejected), `decl_malformed` (the block is unclosed, duplicated or not TOML),
`decl_miss_reason` (why `resources` is None although something was declared) and
`decl_deps_ignored` (a `dependencies` list was declared; we never install anything).
`parse_declaration` never raises: the text is untrusted.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass

from treegrpo_executor.config import GateSettings

MALFORMED = "malformed # /// script block (unclosed or duplicated)"
KEYS = ("cpu", "mem", "ephemeral", "gpu")
_START = re.compile(r"^# /// script[ \t]*$")
_END = re.compile(r"^# ///[ \t]*$")
_ANY_START = re.compile(r"^# /// [A-Za-z0-9-]+[ \t]*$")


@dataclass(frozen=True)
class Declaration:
    resources: dict[str, float] | None = None
    malformed: bool = False
    miss_reason: str | None = None
    deps_ignored: bool = False

    @property
    def gpu(self) -> int:
        return int(self.resources.get("gpu", 0)) if self.resources else 0


def parse_declaration(code: str, gate: GateSettings) -> Declaration:
    try:
        return _parse(code, gate)
    except Exception as exc:  # a parser bug must not become a service crash; record why
        return Declaration(malformed=True, miss_reason=f"{MALFORMED[:-1]}; {type(exc).__name__})")


def _parse(code: str, gate: GateSettings) -> Declaration:
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    starts = [i for i, line in enumerate(lines) if _START.match(line)]
    if not starts:
        return Declaration()
    if len(starts) > 1:
        return Declaration(malformed=True, miss_reason=MALFORMED)
    body = _block_body(lines, starts[0])
    if body is None:
        return Declaration(malformed=True, miss_reason=MALFORMED)
    try:
        meta = tomllib.loads("\n".join(body))
    except tomllib.TOMLDecodeError as exc:
        return Declaration(malformed=True, miss_reason=f"malformed # /// script block (not TOML: {exc})")
    deps = meta.get("dependencies")
    deps_ignored = isinstance(deps, list) and len(deps) > 0
    tool = meta.get("tool")
    table = tool.get("resources") if isinstance(tool, dict) else None
    if table is None:
        return Declaration(deps_ignored=deps_ignored)
    if not isinstance(table, dict):
        return Declaration(miss_reason="[tool.resources] is not a table", deps_ignored=deps_ignored)
    resources, reason = _judge(table, gate)
    return Declaration(resources=resources, miss_reason=reason, deps_ignored=deps_ignored)


def _block_body(lines: list[str], start: int) -> list[str] | None:
    """The comment lines between the start and the closing `# ///`, stripped of `# `; None if unclosed."""
    body: list[str] = []
    for line in lines[start + 1 :]:
        if _END.match(line):
            return body
        if _ANY_START.match(line) or not line.startswith("#"):
            return None
        if line != "#" and not line.startswith("# "):
            return None
        body.append(line[2:] if line.startswith("# ") else "")
    return None


def _judge(table: dict, gate: GateSettings) -> tuple[dict[str, float] | None, str | None]:
    out: dict[str, float] = {
        "cpu": gate.default_cpu,
        "mem": gate.default_mem,
        "ephemeral": gate.default_ephemeral,
    }
    for key in KEYS:
        if key not in table:
            continue
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None, f"{key}={_fmt(value)} is not a number"
        rng = getattr(gate, key)
        if not rng.lo <= value <= rng.hi:
            return None, f"{key}={_fmt(value)} out of range {_fmt(rng.lo)}..{_fmt(rng.hi)}"
        out[key] = value
    return {k: _num(v) for k, v in out.items()}, None


def _num(v: float) -> float:
    return int(v) if float(v).is_integer() else float(v)


def _fmt(v: object) -> str:
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return str(int(v))
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 40 else text[:37] + "..."
