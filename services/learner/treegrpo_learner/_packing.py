"""Padding-free packing: variable-length sequences laid end to end in token-budgeted micro-batches,
siblings that share a prompt computing it once.

One micro-batch is a single row of tokens cut into *segments*. A root segment is a sequence on its
own (prompt + response), or the prompt of a group whose siblings share it; a child segment is one
sibling's response. Roots come first in the row, children after them. A child attends to its
root's whole prompt plus itself, starts the linear-attention recurrence from the root's final
state, and continues its positions after the prompt, so its tokens see exactly what they would
see in `prompt + response` alone: the prompt is computed once per group and its gradient is the
sum of every sibling's (autograd adds the uses). Only the rows whose hidden state predicts a
response token are sent to the LM head; a child's first token is predicted by the prompt's last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from treegrpo_learner._layout import Layout


@dataclass(frozen=True)
class SeqSpec:
    prompt_ids: Sequence[int]
    response_ids: Sequence[int]

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


@dataclass
class MicroBatch:
    samples: list[int]  # indices into the caller's sequence list, in the order of `rows`
    input_ids: torch.Tensor  # [1, T]
    position_ids: torch.Tensor  # [1, T]: from 0 per root, after the prompt for a child
    layout: Layout
    rows: torch.Tensor  # [M] positions whose hidden state predicts a response token
    targets: torch.Tensor  # [M] the response tokens predicted
    response_lens: list[int]

    @property
    def tokens(self) -> int:
        return int(self.input_ids.numel())

    def to(self, device: torch.device | str) -> MicroBatch:
        move = {
            k: getattr(self, k).to(device, non_blocking=True)
            for k in ("input_ids", "position_ids", "rows", "targets")
        }
        return MicroBatch(
            samples=self.samples, layout=self.layout.to(device), response_lens=self.response_lens, **move
        )


def units(seqs: Sequence[SeqSpec], indices: Sequence[int], budget: int, share: bool) -> list[list[int]]:
    """`indices` grouped into packing units: siblings with the same prompt together (when `share`),
    a group split so that prompt + its responses fit `budget` (a unit of one is a plain sequence)."""
    groups: dict[object, list[int]] = {}
    for i in indices:  # an empty response would be a zero-length child: keep it a plain sequence
        key = tuple(seqs[i].prompt_ids) if share and seqs[i].response_ids else ("seq", i)
        groups.setdefault(key, []).append(i)
    out: list[list[int]] = []
    for members in groups.values():
        prompt = len(seqs[members[0]].prompt_ids)
        cur: list[int] = []
        size = prompt
        for i in members:
            n = len(seqs[i].response_ids)
            if cur and size + n > budget:
                out.append(cur)
                cur, size = [], prompt
            cur.append(i)
            size += n
        out.append(cur)
    return out


def unit_length(seqs: Sequence[SeqSpec], unit: Sequence[int]) -> int:
    return len(seqs[unit[0]].prompt_ids) + sum(len(seqs[i].response_ids) for i in unit)


def plan(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """First-fit decreasing bins of total length <= budget (a longer item gets a bin alone)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for b, free in enumerate(room):
            if lengths[i] <= free:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(budget - lengths[i])
    return bins


def build(seqs: Sequence[SeqSpec], group: Sequence[Sequence[int]]) -> MicroBatch:
    """One row from packing units (lists of indices into `seqs`): roots first, then children."""
    roots = [u if len(u) == 1 else None for u in group]
    ids: list[int] = []
    pos: list[int] = []
    seg_lens: list[int] = []
    rows: list[int] = []
    targets: list[int] = []
    order: list[int] = []
    for u in group:  # roots: a whole sequence, or a group's prompt
        prompt = list(seqs[u[0]].prompt_ids)
        if not prompt:
            raise ValueError("a sequence needs at least one prompt token to predict its first response token")
        tokens = prompt + (list(seqs[u[0]].response_ids) if len(u) == 1 else [])
        if len(u) == 1:
            r = len(seqs[u[0]].response_ids)
            rows.extend(range(len(ids) + len(prompt) - 1, len(ids) + len(prompt) + r - 1))
            targets.extend(seqs[u[0]].response_ids)
            order.append(u[0])
        ids.extend(tokens)
        pos.extend(range(len(tokens)))
        seg_lens.append(len(tokens))
    starts = [sum(seg_lens[:k]) for k in range(len(seg_lens))]
    parents: list[int] = []
    for k, u in enumerate(group):  # children: each sibling's response after its group's prompt
        if roots[k] is not None:
            continue
        p = seg_lens[k]
        for i in u:
            resp = list(seqs[i].response_ids)
            rows.append(starts[k] + p - 1)
            rows.extend(range(len(ids), len(ids) + len(resp) - 1))
            targets.extend(resp)
            order.append(i)
            ids.extend(resp)
            pos.extend(range(p, p + len(resp)))
            seg_lens.append(len(resp))
            parents.append(k)
    return MicroBatch(
        samples=order,
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([pos], dtype=torch.long),
        layout=Layout(seg_lens, len(group), parents),
        rows=torch.tensor(rows, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        response_lens=[len(seqs[i].response_ids) for i in order],
    )


def pack(seqs: Sequence[SeqSpec], budget: int, share: bool = True) -> list[MicroBatch]:
    """All of `seqs` in micro-batches of at most `budget` tokens (a longer unit gets one alone)."""
    us = units(seqs, range(len(seqs)), budget, share)
    return [build(seqs, [us[k] for k in b]) for b in plan([unit_length(seqs, u) for u in us], budget)]


def mini_batches(items: list[int], parts_: int) -> list[list[int]]:
    """`items` in `parts_` consecutive, near-equal mini-batches (at least one, possibly empty)."""
    parts_ = max(1, min(parts_, len(items))) if items else 1
    size = math.ceil(len(items) / parts_) if items else 0
    return [items[i : i + size] for i in range(0, len(items), size)] if items else [[]]
