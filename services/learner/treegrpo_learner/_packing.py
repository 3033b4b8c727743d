"""Padding-free packing: variable-length sequences laid end to end in token-budgeted micro-batches.

One micro-batch is a single row of tokens. Position ids restart at 0 for every sequence and
`cu_seqlens` marks the boundaries, so attention (varlen kernels, or one causal SDPA per
sequence) never crosses from one sequence into the next. Only the rows whose hidden state
predicts a response token are sent to the LM head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SeqSpec:
    prompt_ids: Sequence[int]
    response_ids: Sequence[int]

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


@dataclass
class MicroBatch:
    samples: list[int]  # indices into the caller's sequence list, in packing order
    input_ids: torch.Tensor  # [1, T]
    position_ids: torch.Tensor  # [1, T], restarting at 0 per sequence
    cu_seqlens: torch.Tensor | None  # [n + 1] int64; None for padded rows (one sequence per row)
    max_len: int
    rows: torch.Tensor  # [M] positions whose hidden state predicts a response token
    targets: torch.Tensor  # [M] the response tokens predicted
    row_sample: torch.Tensor  # [M] which of `samples` (0..n-1) each row belongs to
    response_lens: list[int]

    @property
    def tokens(self) -> int:
        return int(self.input_ids.numel())

    def to(self, device: torch.device | str) -> MicroBatch:
        move = {
            k: (None if getattr(self, k) is None else getattr(self, k).to(device, non_blocking=True))
            for k in ("input_ids", "position_ids", "cu_seqlens", "rows", "targets", "row_sample")
        }
        return MicroBatch(
            samples=self.samples, max_len=self.max_len, response_lens=self.response_lens, **move
        )


def plan(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """First-fit decreasing bins of total length <= budget (a longer sequence gets a bin alone)."""
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


def build(seqs: Sequence[SeqSpec], members: list[int]) -> MicroBatch:
    ids: list[int] = []
    pos: list[int] = []
    cu = [0]
    rows: list[int] = []
    targets: list[int] = []
    row_sample: list[int] = []
    for k, i in enumerate(members):
        s = seqs[i]
        p, r = len(s.prompt_ids), len(s.response_ids)
        if p == 0:
            raise ValueError("a sequence needs at least one prompt token to predict its first response token")
        start = len(ids)
        ids.extend(s.prompt_ids)
        ids.extend(s.response_ids)
        pos.extend(range(p + r))
        cu.append(len(ids))
        rows.extend(range(start + p - 1, start + p + r - 1))
        targets.extend(s.response_ids)
        row_sample.extend([k] * r)
    lens = [cu[j + 1] - cu[j] for j in range(len(members))]
    return MicroBatch(
        samples=list(members),
        input_ids=torch.tensor([ids], dtype=torch.long),
        position_ids=torch.tensor([pos], dtype=torch.long),
        cu_seqlens=torch.tensor(cu, dtype=torch.long),
        max_len=max(lens),
        rows=torch.tensor(rows, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        row_sample=torch.tensor(row_sample, dtype=torch.long),
        response_lens=[len(seqs[i].response_ids) for i in members],
    )


def pack(seqs: Sequence[SeqSpec], budget: int) -> list[MicroBatch]:
    return [build(seqs, members) for members in plan([s.length for s in seqs], budget)]


def plan_rows(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Bins of similar-length sequences with rows x longest <= budget (longest first, so padding stays
    small)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    for i in order:
        if bins and lengths[bins[-1][0]] * (len(bins[-1]) + 1) <= budget:
            bins[-1].append(i)
        else:
            bins.append([i])
    return bins


def build_rows(seqs: Sequence[SeqSpec], members: list[int]) -> MicroBatch:
    """One sequence per row, right-padded: for models whose layers cannot honour packed boundaries
    (recurrent linear attention without varlen kernels). Causal layers never look at the padding
    that follows a sequence, so the real tokens' outputs are exact."""
    width = max(seqs[i].length for i in members)
    ids = torch.zeros(len(members), width, dtype=torch.long)
    rows: list[int] = []
    targets: list[int] = []
    row_sample: list[int] = []
    for k, i in enumerate(members):
        s = seqs[i]
        p, r = len(s.prompt_ids), len(s.response_ids)
        if p == 0:
            raise ValueError("a sequence needs at least one prompt token to predict its first response token")
        ids[k, : p + r] = torch.tensor(list(s.prompt_ids) + list(s.response_ids))
        rows.extend(range(k * width + p - 1, k * width + p + r - 1))
        targets.extend(s.response_ids)
        row_sample.extend([k] * r)
    return MicroBatch(
        samples=list(members),
        input_ids=ids,
        position_ids=torch.arange(width).expand(len(members), width).contiguous(),
        cu_seqlens=None,
        max_len=width,
        rows=torch.tensor(rows, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        row_sample=torch.tensor(row_sample, dtype=torch.long),
        response_lens=[len(seqs[i].response_ids) for i in members],
    )


def pack_rows(seqs: Sequence[SeqSpec], budget: int) -> list[MicroBatch]:
    return [build_rows(seqs, members) for members in plan_rows([s.length for s in seqs], budget)]
