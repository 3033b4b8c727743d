"""Model backends behind one interface (`Backend`): hf (embedded default), vllm, openai.

`create_backend(config)` builds the one the config names. The vllm and openai backends live in
`_vllm.py` / `_openai.py`; each exposes `build(config: SamplerConfig) -> Backend`, imported lazily
so the hf path never imports vLLM or an HTTP client.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from treegrpo_sampler.backends._base import Backend, Completion, EngineLost, SamplingParams
from treegrpo_sampler.backends._vllm_stats import EngineCounts
from treegrpo_sampler.backends._vllm_targets import TargetCheck, UnsupportedModel, vllm_lora_targets

if TYPE_CHECKING:
    from treegrpo_sampler.config import SamplerConfig

__all__ = [
    "Backend",
    "Completion",
    "EngineCounts",
    "EngineLost",
    "SamplingParams",
    "TargetCheck",
    "UnsupportedModel",
    "create_backend",
    "resolve_model_path",
    "vllm_lora_targets",
]


def resolve_model_path(config: SamplerConfig) -> Path:
    from treegrpo.config import treegrpo_home

    return Path(config.model).expanduser() if config.model else treegrpo_home() / "models" / "small"


def create_backend(config: SamplerConfig) -> Backend:
    """The backend the config names, loaded and ready to sample (version 0 = the base model)."""
    if config.backend == "hf":
        from treegrpo_sampler.backends._hf import HfBackend

        path = resolve_model_path(config)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no model at {path}: build one with `treegrpo model init {path}`")
        return HfBackend(path, config.hf.device, config.hf.dtype, config.hf.torch_threads)
    module = importlib.import_module(f"treegrpo_sampler.backends._{config.backend}")
    return module.build(config)
