"""Gated DeltaNet on the GPU: flash-linear-attention's kernels against transformers' torch reference.

Run on the device machine with Triton >= 3.7.1 and fla staged (`scripts/gpu_fla.sh`, docs/LEARNER.md):
    PYTHONPATH=/root/site:$PWD:$PWD/services/learner \
        python3 -m pytest -m gpu --noconftest tests/gpu/test_learner_gdn_gpu.py  # no pydantic on the image

The model has the Qwen3.5-9B's linear-attention head layout (16 key / 32 value heads of 128, so
fla's autotuning is shared with the 9B benchmark) in a small hybrid (3 DeltaNet + 1 full attention).
The truth is a float32 model on the torch reference path with every sequence alone; each bf16 run
(the torch reference and fla, both with shared prompts packed) is held to the truth. Tolerances,
stated: loss within 1 % relative; all LoRA gradients together within 3 % relative L2, and no worse
than twice the bf16 reference's own error + 0.5 %; each LoRA tensor within 10 % relative L2.
`TG_GPU_REPORT=path.json` writes every error measured.

Imports a private module: `treegrpo_learner._attention`, `treegrpo_learner._gdn`,
`treegrpo_learner._model`, `treegrpo_learner._trainer` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import copy
import json
import os
from types import SimpleNamespace

import pytest
import torch

from treegrpo_learner._gdn import fla_available
from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings, TrainSample

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.timeout(900),  # fla's first calls compile and autotune its kernels
]
LORA = SimpleNamespace(r=8, alpha=16, dropout=0.0, target_modules="all-linear")


def model_9b_heads():
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from treegrpo_learner._attention import register
    from treegrpo_learner._model import wrap_lora

    register()
    cfg = Qwen3_5TextConfig(
        vocab_size=2048,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        tie_word_embeddings=False,
        use_cache=False,
    )  # linear heads: the 9B's defaults (16 x 128 keys, 32 x 128 values)
    cfg._attn_implementation = "tg_packed"
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(cfg).cuda()
    for p in model.parameters():
        p.requires_grad_(False)
    model = wrap_lora(model, LORA)
    with torch.no_grad():  # LoRA B starts at zero: give every adapter matrix a gradient
        for p in model.parameters():
            if p.requires_grad:
                p.normal_(0.0, 0.02)
    return model


def batch() -> list[TrainSample]:
    g = torch.Generator().manual_seed(1)

    def ids(n: int) -> tuple[int, ...]:
        return tuple(torch.randint(0, 2048, (n,), generator=g).tolist())

    p1, p2 = ids(300), ids(70)
    spec = [(p1, 200), (p1, 33), (p1, 129), (p2, 250), (p2, 1), (ids(90), 310)]
    return [
        TrainSample("g", f"n{k}", p, ids(r), tuple([-7.0] * r), 1.0 - 0.4 * k)
        for k, (p, r) in enumerate(spec)
    ]


def run(model, dtype: str, backend: str, share: bool):
    cfg = TrainerSettings(
        device="cuda",
        dtype=dtype,
        lr=0.0,
        grad_clip=0.0,
        gdn_backend=backend,
        share_prompts=share,
        micro_batch_tokens=4096 if share else 1,
    )
    trainer = PolicyTrainer(model, cfg)
    assert trainer.policy.gdn_backend == backend
    loss = trainer.step(batch()).metrics["loss"]
    return loss, {n: p.grad.float().clone() for n, p in model.named_parameters() if p.requires_grad}


def errors(loss, grads, truth) -> dict:
    t_loss, t_grads = truth
    flat = torch.cat([g.flatten() for g in grads.values()])
    t_flat = torch.cat([t_grads[n].flatten() for n in grads])
    per = {n: float((g - t_grads[n]).norm() / t_grads[n].norm()) for n, g in grads.items()}
    return {
        "loss": abs(loss - t_loss) / abs(t_loss),
        "grads_rel_l2": float((flat - t_flat).norm() / t_flat.norm()),
        "worst_tensor": max(per.values()),
        "worst_tensor_name": max(per, key=per.get),
    }


@pytest.mark.skipif(not fla_available(), reason="flash-linear-attention does not import (scripts/gpu_fla.sh)")
def test_fla_loss_and_lora_gradients_match_the_torch_reference():
    import triton

    assert tuple(int(x) for x in triton.__version__.split(".")[:3]) >= (3, 7, 1)  # fla's Hopper guard
    bf16 = model_9b_heads()
    fp32 = copy.deepcopy(bf16)
    torch.backends.cudnn.allow_tf32 = False  # the truth's convolutions in plain float32
    truth = run(fp32, "float32", "torch", share=False)
    torch.backends.cudnn.allow_tf32 = True
    bf16.to(torch.bfloat16)
    for p in bf16.parameters():  # LoRA weights stay float32, as the learner keeps them
        if p.requires_grad:
            p.data = p.data.float()
    ref = errors(*run(bf16, "bfloat16", "torch", share=True), truth)
    fla = errors(*run(bf16, "bfloat16", "fla", share=True), truth)
    if os.environ.get("TG_GPU_REPORT"):
        json.dump(
            {"torch_bf16_vs_fp32": ref, "fla_bf16_vs_fp32": fla}, open(os.environ["TG_GPU_REPORT"], "w")
        )
    print("torch bf16:", ref, "\nfla bf16:", fla)
    assert fla["loss"] < 1e-2
    assert fla["grads_rel_l2"] < 3e-2
    assert fla["grads_rel_l2"] <= 2 * ref["grads_rel_l2"] + 5e-3
    assert fla["worst_tensor"] < 0.1, fla
