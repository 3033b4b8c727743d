"""Non-finite values in saved weights: what neither a checkpoint nor a served adapter may hold.

A NaN or inf in a LoRA adapter poisons every sample drawn with it (`probability tensor contains
either inf, nan`) and every step trained from it, so both ends check: the learner before it saves
or publishes, the sampler before it serves. torch is imported here only when a check runs.
"""

from __future__ import annotations

from pathlib import Path


def nonfinite_in_tensors(tensors) -> int:
    """How many values of these tensors are NaN or +-inf."""
    import torch

    return int(sum((~torch.isfinite(t.detach())).sum().item() for t in tensors if t.is_floating_point()))


def nonfinite_in_folder(folder: Path) -> dict[str, int]:
    """{file name: non-finite values} for each `*.safetensors` file under `folder` that holds any."""
    from safetensors.torch import load_file

    bad = {}
    for path in sorted(Path(folder).rglob("*.safetensors")):
        n = nonfinite_in_tensors(load_file(str(path)).values())
        if n:
            bad[path.name] = n
    return bad
