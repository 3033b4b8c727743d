"""Adapter key names as vLLM expects them for multimodal wrappers (Qwen3.5).

The learner trains through `AutoModelForCausalLM`, so a Qwen3.5 adapter carries
`base_model.model.model.layers.*` keys. vLLM registers Qwen3.5 only as
`Qwen3_5ForConditionalGeneration`, whose checkpoint names are `model.language_model.layers.*`;
an adapter with the causal-LM names matches no module there and vLLM applies nothing, without an
error (vLLM#48019, #49354). So before an adapter reaches such an engine, its keys are renamed into
a sibling folder `<adapter>.vllm` (the original stays what the learner published and hashed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CAUSAL = "base_model.model.model.layers."
WRAPPED = "base_model.model.model.language_model.layers."


def wraps_language_model(model_dir: str | Path) -> bool:
    """True for a multimodal wrapper config (a `*ForConditionalGeneration` with a `text_config`)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return False
    config = json.loads(path.read_text())
    archs = config.get("architectures") or []
    return "text_config" in config and any(a.endswith("ForConditionalGeneration") for a in archs)


def renamed_key(key: str) -> str:
    return WRAPPED + key[len(CAUSAL) :] if key.startswith(CAUSAL) else key


def adapter_for_engine(model_dir: str | Path, adapter_dir: Path) -> Path:
    """`adapter_dir` itself, or a copy whose keys name the wrapper's language model."""
    if not wraps_language_model(model_dir):
        return adapter_dir
    from safetensors import safe_open
    from safetensors.torch import save_file

    weights = adapter_dir / "adapter_model.safetensors"
    with safe_open(str(weights), framework="pt") as fh:
        keys = list(fh.keys())
        if not any(k.startswith(CAUSAL) for k in keys):
            return adapter_dir
        tensors = {renamed_key(k): fh.get_tensor(k) for k in keys}
    out = adapter_dir.with_name(adapter_dir.name + ".vllm")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in adapter_dir.iterdir():
        if f.is_file() and f.name != weights.name:
            shutil.copy2(f, out / f.name)
    save_file(tensors, str(out / weights.name), metadata={"format": "pt"})
    return out
