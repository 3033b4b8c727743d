"""A trainer's state beyond the adapter's weights, and the adapter's I/O: what a checkpoint saves
and a restore loads (AdamW's moments and every RNG), on one device or across FSDP2 ranks (gathered to
the one-device layout, so a checkpoint restores on any number of ranks)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from treegrpo_learner import _distributed as dd


def capture(opt: torch.optim.Optimizer, params: list, ranks: dd.Ranks | None) -> dict:
    rng = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    if ranks is None:
        return {"optimizer": opt.state_dict(), "rng": rng}
    return {"optimizer": dd.gather_optimizer(opt, params), "rng": rng}  # one-device layout


def restore(opt: torch.optim.Optimizer, params: list, ranks: dd.Ranks | None, state: dict) -> None:
    if ranks is None:
        opt.load_state_dict(state["optimizer"])
    else:
        dd.scatter_optimizer(opt, params, state["optimizer"])
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def exportable(model, ranks: dd.Ranks | None):
    """The live model on one device; with ranks, the adapter gathered once into whole tensors (a
    collective: every rank calls it)."""
    if ranks is None:
        return model
    return dd.GatheredAdapter(model, dd.gather_adapter(model))


def load_adapter(model, ranks: dd.Ranks | None, adapter_dir) -> None:
    from treegrpo_learner import _checkpoint as ckpt

    if ranks is None:
        ckpt.load_adapter_weights(model, adapter_dir)
        return
    from safetensors.torch import load_file

    dd.scatter_adapter(model, load_file(str(Path(adapter_dir) / "adapter_model.safetensors")))
