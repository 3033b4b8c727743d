"""Data-parallel ranks of one learner: FSDP2 sharding, token-balanced work split, gathered state.

Every rank holds a shard of the frozen base and of the adapter (`fully_shard` per decoder layer,
plus a root unit over embeddings, final norm and LM head). Each optimizer step's sequences are
split across ranks by tokens (longest first onto the least-loaded rank); each rank packs its share
into micro-batches as one device would, and ranks with fewer micro-batches run zero-weight dummies
so that every rank enters the same number of forward/backward passes (FSDP's collectives run in
lockstep). Gradients are summed, not averaged: each rank's loss is already its part of the global
token-mean, so the sum over ranks is exactly the one-device loss.

State leaves the ranks in the one-device format (full LoRA tensors, a plain AdamW state dict keyed
by parameter index), gathered on rank 0, so a checkpoint written with N ranks resumes with M.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from treegrpo_learner._packing import MicroBatch, SeqSpec, build, plan, unit_length, units


@dataclass(frozen=True)
class Ranks:
    """This process's place among the learner's ranks. `control` is a gloo group for Python objects
    and barriers inside a call (they never go through NCCL); `idle` a gloo group with a long
    timeout on which the workers wait for rank 0's next call."""

    rank: int
    world: int
    device: torch.device
    mesh: object = None
    control: object = None
    idle: object = None

    @property
    def leader(self) -> bool:
        return self.rank == 0


def balance(lengths: Sequence[int], world: int) -> list[list[int]]:
    """Indices per rank, balanced by tokens: longest first onto the least-loaded rank (LPT).
    Deterministic, so every rank computes every rank's share without communicating."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    loads = [0] * world
    shares: list[list[int]] = [[] for _ in range(world)]
    for i in order:
        r = min(range(world), key=lambda k: (loads[k], len(shares[k]), k))
        shares[r].append(i)
        loads[r] += lengths[i]
    return [sorted(s) for s in shares]


def my_share(lengths: Sequence[int], ranks: Ranks, planner, budget: int) -> tuple[list[int], int]:
    """(positions of this rank's sequences, the largest micro-batch count of any rank)."""
    shares = balance(lengths, ranks.world)
    most = max(len(planner([lengths[k] for k in s], budget)) if s else 0 for s in shares)
    return shares[ranks.rank], most


def micro_batches(
    seqs: Sequence[SeqSpec], indices: list[int], budget: int, share_prompts: bool, ranks: Ranks | None
) -> tuple[list[int], list[MicroBatch | None]]:
    """(this rank's indices, its micro-batches). Siblings sharing a prompt form one packing unit;
    with N ranks the units are balanced by tokens and `None` pads to the largest rank's micro-batch
    count (a zero-weight dummy pass); without ranks, every index and its micro-batches."""
    us = units(seqs, indices, budget, share_prompts)
    lengths = [unit_length(seqs, u) for u in us]
    most = 0
    if ranks is not None and ranks.world > 1:
        share, most = my_share(lengths, ranks, plan, budget)
        us, lengths = [us[k] for k in share], [lengths[k] for k in share]
    mine = [i for u in us for i in u]
    local = {i: k for k, i in enumerate(mine)}  # micro-batch samples index `mine`
    sub = [seqs[i] for i in mine]
    mbs: list[MicroBatch | None] = [
        build(sub, [[local[i] for i in us[b]] for b in members]) for members in plan(lengths, budget)
    ]
    return mine, mbs + [None] * (most - len(mbs))


def share_values(out: list, mine: list[int], ranks: Ranks) -> None:
    """Fill `out` (one slot per sequence) with every rank's values for its own sequences."""
    parts: list = [None] * ranks.world
    dist.all_gather_object(parts, {i: out[i] for i in mine}, group=ranks.control)
    for part in parts:
        for i, v in part.items():
            out[i] = v


def pool_metrics(acc: dict[str, list[float]], ranks: Ranks, keep: tuple[str, ...]) -> dict[str, list[float]]:
    """Every rank's per-micro-batch metrics together; `keep` ones are already global (rank 0's)."""
    pooled: list = [None] * ranks.world
    dist.all_gather_object(pooled, dict(acc), group=ranks.control)
    out: dict[str, list[float]] = defaultdict(list, {k: v for k, v in acc.items() if k in keep})
    for other in pooled:
        for k, v in other.items():
            if k not in keep:
                out[k].extend(v)
    return out


def sum_over_ranks(value: float, ranks: Ranks) -> float:
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, group=ranks.control)
    return float(t[0])


def dummy() -> MicroBatch:
    """The smallest micro-batch (one prompt token, one response token), trained with weight zero."""
    return build([SeqSpec((0,), (0,))], [[0]])


def shard(policy: torch.nn.Module, decoder: torch.nn.Module, ranks: Ranks) -> None:
    """FSDP2 over `policy` (the module the trainer calls): one unit per decoder layer, the root
    holding the rest. Gradients reduce with a sum (see the module docstring)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    for p in policy.parameters():  # the ranks start from rank 0's adapter, whatever their RNG did
        if p.requires_grad:
            dist.broadcast(p.data, src=0)
    for layer in decoder.layers:
        fully_shard(layer, mesh=ranks.mesh)
    fully_shard(policy, mesh=ranks.mesh)
    for unit in policy.modules():  # both settings are per unit, not inherited
        if isinstance(unit, FSDPModule):
            unit.set_gradient_divide_factor(1.0)  # NCCL: a pre-multiplied sum by 1
            if hasattr(unit, "set_force_sum_reduction_for_comms"):  # gloo has no PREMUL_SUM (torch >= 2.8)
                unit.set_force_sum_reduction_for_comms(True)


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor on every rank (a collective for a sharded DTensor), on the CPU."""
    if hasattr(t, "full_tensor"):
        t = t.full_tensor()
    return t.detach().cpu()


def local_shard(full_value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a whole tensor, laid out like the (sharded) parameter `like`;
    no communication: every rank holds `full_value`."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    value = full_value.to(device=like.device, dtype=like.dtype)
    if isinstance(like, DTensor):
        return distribute_tensor(value, like.device_mesh, like.placements, src_data_rank=None)
    return value


def named_trainable(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def gather_adapter(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every trainable tensor whole, by its peft name (a collective: every rank calls it)."""
    return {n: full(p) for n, p in named_trainable(model)}


def scatter_adapter(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Load whole LoRA tensors (peft's saved names, no adapter name) into the sharded adapter."""
    from peft.utils.save_and_load import get_peft_model_state_dict

    saved_names = get_peft_model_state_dict(model, state_dict={n: p for n, p in named_trainable(model)})
    by_live = dict(zip((n for n, _ in named_trainable(model)), saved_names, strict=True))
    missing = [s for s in by_live.values() if s not in weights]
    if missing:
        raise ValueError(f"adapter weights do not match the model: {missing[:3]}")
    with torch.no_grad():
        for name, p in named_trainable(model):
            p.copy_(local_shard(weights[by_live[name]].float(), p))


def gather_optimizer(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> dict:
    """AdamW's state with whole tensors, in `opt.state_dict()`'s one-device layout."""
    sd = opt.state_dict()
    index = {id(p): i for i, p in enumerate(params)}
    for p in params:
        st = opt.state.get(p)
        if st:
            sd["state"][index[id(p)]] = {
                k: full(v)
                if torch.is_tensor(v) and v.dim() > 0
                else (v.detach().cpu() if torch.is_tensor(v) else v)
                for k, v in st.items()
            }
    return sd


def scatter_optimizer(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], sd: dict) -> None:
    """The inverse of `gather_optimizer`: each rank keeps its shard of each moment."""
    state = {}
    for i, st in sd["state"].items():
        p = params[int(i)]
        state[int(i)] = {
            k: local_shard(v, p) if torch.is_tensor(v) and v.dim() > 0 else v for k, v in st.items()
        }
    opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})


class GatheredAdapter:
    """A version's adapter, gathered once on rank 0: `save_pretrained` writes peft's files from the
    whole tensors (the checkpoint and the push both call it) without touching the sharded model."""

    def __init__(self, model, weights: dict[str, torch.Tensor]):
        self.model, self.weights = model, weights

    def save_pretrained(self, path: str | Path, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """peft's files of the gathered weights, or of `state_dict` (the same keys, cast for a push)."""
        self.model.save_pretrained(str(path), state_dict=self.weights if state_dict is None else state_dict)

    def trainable_tensors(self):
        """The gathered adapter weights: what a checkpoint checks for non-finite values."""
        return self.weights.values()
