"""The model builder and the hf backend on a tiny local model (no network, no hub).

Imports a private module: `treegrpo_sampler.backends._hf` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from treegrpo.models import build_model
from treegrpo_sampler import SamplingParams
from treegrpo_sampler.backends._hf import HfBackend

pytestmark = pytest.mark.timeout(180)
MSGS = [{"role": "system", "content": "You write code."}, {"role": "user", "content": "Write a script."}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_model(
        tmp_path_factory.mktemp("model") / "tiny", size="tiny", vocab_size=1024, tokenizer_bytes=1 << 20
    )


def make_adapter(model_dir, out, seed):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    peft = get_peft_model(
        base,
        LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False
        ),
    )
    for p in peft.parameters():
        if p.requires_grad:
            p.data.mul_(40.0)  # a visibly different policy
    peft.save_pretrained(out)
    return out


def test_model_init_writes_a_qwen3_model_with_chat_template_and_think_tokens(tiny):
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(tiny).model_type == "qwen3"
    tok = AutoTokenizer.from_pretrained(tiny)
    assert tok.tokenize("<think>") == ["<think>"] and tok.tokenize("</think>") == ["</think>"]
    text = tok.apply_chat_template(MSGS, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and tok.eos_token == "<|im_end|>"
    info = json.loads((tiny / "treegrpo_model.json").read_text())
    assert info["params"] < 2_000_000


async def test_group_is_sampled_in_one_batch_with_raw_logprobs_of_the_sampled_tokens(tiny):
    b = HfBackend(tiny)
    comps = await b.generate(MSGS, 4, SamplingParams(max_new_tokens=24, temperature=0.7, seed=3))
    assert len(comps) == 4 and len({tuple(c.token_ids) for c in comps}) > 1
    c = comps[0]
    assert len(c.token_ids) == len(c.logprobs) and c.finish_reason in ("stop", "length")
    ids = torch.tensor([c.prompt_token_ids + c.token_ids])
    with torch.no_grad():
        logits = b.model(ids).logits[0, len(c.prompt_token_ids) - 1 : -1]
    raw = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
    tempered = torch.log_softmax(logits / 0.7, -1).gather(-1, torch.tensor(c.token_ids)[:, None]).squeeze(-1)
    assert torch.allclose(raw, torch.tensor(c.logprobs), atol=1e-4)  # the raw distribution ...
    assert not torch.allclose(tempered, torch.tensor(c.logprobs), atol=1e-3)  # ... not the processed one


async def test_sampling_is_reproducible_with_a_seed(tiny):
    b = HfBackend(tiny)
    p = SamplingParams(max_new_tokens=12, seed=11)
    first, again = await b.generate(MSGS, 3, p), await b.generate(MSGS, 3, p)
    assert [c.token_ids for c in first] == [c.token_ids for c in again]


async def test_adapter_hot_swap_changes_the_policy_and_drops_the_old_adapter(tiny, tmp_path):
    b = HfBackend(tiny)
    p = SamplingParams(max_new_tokens=12, seed=5)
    base = await b.generate(MSGS, 2, p)
    await b.load_adapter(1, make_adapter(tiny, tmp_path / "a1", 1))
    v1 = await b.generate(MSGS, 2, p)
    await b.load_adapter(2, make_adapter(tiny, tmp_path / "a2", 2))
    v2 = await b.generate(MSGS, 2, p)
    assert b.version == 2 and list(b.model.peft_config) == ["v2"]
    assert base[0].logprobs != v1[0].logprobs != v2[0].logprobs


async def test_a_broken_adapter_is_refused_and_the_old_version_keeps_serving(tiny, tmp_path):
    b = HfBackend(tiny)
    await b.load_adapter(1, make_adapter(tiny, tmp_path / "a1", 1))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_config.json").write_text("{not json")
    with pytest.raises((ValueError, OSError)):
        await b.load_adapter(2, broken)
    assert b.version == 1 and (await b.generate(MSGS, 1, SamplingParams(max_new_tokens=4)))[0].token_ids


def test_the_sampler_config_and_the_hf_backend_import_no_http_client():
    # httpx is the openai backend's alone: its settings live in the sampler's config, so the config
    # (what the runner, the CLI and the probes read), the service and the hf backend import without it.
    # (transformers itself imports httpx through huggingface_hub >= 1.0 once a model loads.)
    code = textwrap.dedent("""
        import sys
        from treegrpo_sampler.config import OpenAISettings, SamplerConfig, VllmSettings
        import treegrpo_sampler.backends._hf
        import treegrpo_sampler.service
        SamplerConfig(backend="hf", openai=OpenAISettings(), vllm=VllmSettings())
        assert "httpx" not in sys.modules, "imported httpx"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
