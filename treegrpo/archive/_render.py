"""The two rendered views of a round: `__tree.txt` and `__transcript.md` (see docs/ARCHIVE.md).

Both walk the same tree: roots are nodes whose parent is not in the round (drafts), children sit
under their parent in record order, depth-first. Nothing here reads the clock or the environment,
so the same records always render to the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from treegrpo.archive._schema import NodeRecord
from treegrpo.events import Status

SHORT_ID = 8
_TICKS = re.compile(r"`{3,}")


def walk(records: Sequence[NodeRecord]) -> Iterator[tuple[int, NodeRecord]]:
    """(depth, record) in tree order; an unknown or missing parent makes a node a root."""
    ids = {r.id for r in records}
    children: dict[str, list[NodeRecord]] = {}
    roots: list[NodeRecord] = []
    for r in records:
        if r.parent_id is not None and r.parent_id in ids and r.parent_id != r.id:
            children.setdefault(r.parent_id, []).append(r)
        else:
            roots.append(r)
    seen: set[str] = set()
    stack = [(0, r) for r in reversed(roots)]
    while stack:  # iterative: an expansion chain can be as deep as the round is long
        depth, r = stack.pop()
        if r.id in seen:  # a parent cycle in a hand-edited file must not loop forever
            continue
        seen.add(r.id)
        yield depth, r
        stack.extend((depth + 1, c) for c in reversed(children.get(r.id, [])))


def _num(value: float | None) -> str:
    return "None" if value is None else repr(value)


def render_tree(records: Sequence[NodeRecord]) -> str:
    """`[id] mode status test=value sib_grp=id`, two spaces of indent per expansion depth."""
    lines = [
        f"{'  ' * d}[{r.id}] {r.mode} {r.status} test={_num(r.test_metric)} sib_grp={r.sibling_group}"
        for d, r in walk(records)
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def _tree_line(depth: int, r: NodeRecord) -> str:
    prefix = "" if depth == 0 else "  " * (depth - 1) + "|- "
    status = f"{r.status} ({r.exc_type})" if r.exc_type else r.status
    score = "" if r.oriented is None else f" oriented={r.oriented:.5f}"
    reward = "" if r.reward is None else f" reward={r.reward:.3f}"
    return f"{prefix}{r.id[:SHORT_ID]} step {r.step} {r.mode} {status}{score}{reward}"


def _fence(text: str) -> str:
    longest = max((len(m) for m in _TICKS.findall(text)), default=2)
    return "`" * max(3, longest + 1)


def _block(title: str, text: str, lang: str = "") -> list[str]:
    if not text:
        return []
    fence = _fence(text)
    return [f"**{title}**", "", f"{fence}{lang}", text.rstrip("\n"), fence, ""]


def render_transcript(task: str, round_: int, records: Sequence[NodeRecord]) -> str:
    valid = sorted(
        (r.oriented for r in records if r.status == Status.OK and r.oriented is not None), reverse=True
    )
    out = [
        f"# {task} · round {round_}",
        "",
        f"nodes: {len(records)} · valid: {sum(r.status == 'ok' for r in records)}",
        "",
        "valid oriented scores (higher is better): " + (", ".join(f"{v:.5f}" for v in valid) or "none"),
        "",
        "## Tree",
        "",
        "```",
    ]
    order = list(walk(records))
    out += [_tree_line(d, r) for d, r in order]
    out += ["```", "", "## Nodes", ""]
    for _, r in order:
        parent = r.parent_id[:SHORT_ID] if r.parent_id else "none"
        out += [
            f"### {r.id[:SHORT_ID]} · {r.mode} · {r.status}",
            "",
            f"id `{r.id}` · parent `{parent}` · group `{r.sibling_group}` · step {r.step} · "
            f"exec {r.exec_time:.1f}s · test_metric {_num(r.test_metric)}"
            + (f" · grade_error: {r.grade_error}" if r.grade_error else ""),
            "",
        ]
        out += (
            _block("plan", r.plan)
            + _block("code", r.code, "python")
            + _block("output tail", r.term_tail, "text")
        )
    return "\n".join(out) + "\n"
