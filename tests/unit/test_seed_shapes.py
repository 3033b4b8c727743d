"""The seed's model shapes as random checkpoints: the real parameter counts, one folder that both
vLLM's class (ConditionalGeneration) and the learner's loader (AutoModelForCausalLM) read, and a
tokenizer that decodes every id a random model can sample.

Imports a private module: `treegrpo.models._seed_shapes` (what these tests exercise is not on the
package's public surface).
"""

import pytest
import torch

from treegrpo.models._seed_shapes import build_seed_model, padded_tokenizer, seed_config


@pytest.mark.parametrize("shape,billions,full", [("qwen35-9b", 8.95, 8), ("qwen36-27b", 26.90, 16)])
def test_the_seed_shapes_have_their_real_size_and_layer_pattern(shape, billions, full):
    from transformers import Qwen3_5ForConditionalGeneration

    cfg = seed_config(shape, padded_tokenizer(0, bpe_vocab=512))
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(cfg)
    params = sum(p.numel() for p in model.parameters())
    assert abs(params / 1e9 - billions) < 0.01
    assert cfg.text_config.vocab_size == 248_320
    assert cfg.text_config.layer_types.count("full_attention") == full


def test_a_padded_tokenizer_decodes_every_id_and_keeps_the_chat_template():
    tok = padded_tokenizer(4000, bpe_vocab=512)
    assert len(tok) == 4000
    text = tok.decode(list(range(len(tok) - 50, len(tok))))
    assert "tok" in text and tok.eos_token == "<|im_end|>"
    assert tok.apply_chat_template(
        [{"role": "user", "content": "x"}], add_generation_prompt=True, tokenize=False
    )


def test_the_tiny_shape_is_one_folder_for_vllm_s_class_and_the_learner_s_loader(tmp_path):
    from transformers import AutoModelForCausalLM

    folder = build_seed_model(tmp_path / "m", "qwen35-tiny")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj", "q_proj"} <= names
    assert '"Qwen3_5ForConditionalGeneration"' in (folder / "config.json").read_text()
