"""A training pair (chat prompt -> completion) and the completion format the sampler parses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    prompt_messages: tuple[tuple[str, str], ...]  # ((role, content), ...) exactly as served
    completion: str  # raw completion text, without the end token
    task: str
    mode: str  # draft | improve | debug
    source: str  # "corpus:<file>" or "archive:<run>/<node_id>"

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.prompt_messages]


def make_pair(messages: list[dict[str, str]], completion: str, task: str, mode: str, source: str) -> Pair:
    return Pair(tuple((m["role"], m["content"]) for m in messages), completion, task, mode, source)


def render_completion(plan: str, code: str, thinking: str = "") -> str:
    """What the sampler's parser reads: optional <think> block, a short plan, one python fence."""
    head = f"<think>\n{thinking.strip()}\n</think>\n\n" if thinking.strip() else ""
    return f"{head}{plan.strip()}\n\n```python\n{code.strip(chr(10))}\n```"
