"""Splitting a completion into thinking, plan and code (the node's three text fields)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>(.*?)(</think>|$)", re.DOTALL)
# An opening fence (```python, ```py or bare ```), the body, and a closing fence on its own line.
_FENCE = re.compile(r"^```[ \t]*(python|py|python3)?[ \t]*\n(.*?)(^```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class ParsedCompletion:
    thinking: str
    plan: str
    code: str  # empty: the executor records `no_code`


def _compiles(code: str) -> bool:
    try:
        compile(code, "<node>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def parse_completion(text: str) -> ParsedCompletion:
    """`<think>…</think>` → thinking; text before the first fence → plan; the python block → code.

    Of several fenced blocks the first that compiles wins (AIDE keeps blocks that compile); a
    block that never closes (the budget ran out) counts only if it compiles; if none compiles the
    first closed block is kept so the executor records the real SyntaxError, not `no_code`."""
    thinking = ""
    rest = text
    m = _THINK.search(text)
    if m:
        thinking = m.group(1).strip()
        rest = text[: m.start()] + text[m.end() :]
    blocks = []
    for fm in _FENCE.finditer(rest):
        closed = bool(fm.group(3))
        if fm.group(1) is None and not closed:
            continue
        blocks.append((fm.start(), fm.group(2).rstrip("\n"), closed))
    if not blocks:
        return ParsedCompletion(thinking, rest.strip(), "")
    plan = rest[: blocks[0][0]].strip()
    compiled = [b for b in blocks if b[1].strip() and _compiles(b[1])]
    if compiled:
        return ParsedCompletion(thinking, plan, compiled[0][1])
    closed = [b for b in blocks if b[2] and b[1].strip()]
    return ParsedCompletion(thinking, plan, closed[0][1] if closed else "")
