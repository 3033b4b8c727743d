"""The small local model every offline run uses: a Qwen3-architecture model with random weights
and a locally trained byte-level BPE tokenizer (no hub). Shared by the sampler (`treegrpo model
init`) and the learner's SFT (the demo policy), so it lives in the core.

    from treegrpo.models import build_model
    build_model(out_dir, size="small")     # config.json, weights, tokenizer, treegrpo_model.json
"""

from treegrpo.models._builder import (
    CHAT_TEMPLATE,
    EOS,
    PAD,
    SIZES,
    SPECIAL_TOKENS,
    ModelSize,
    build_model,
    train_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "EOS",
    "PAD",
    "SIZES",
    "SPECIAL_TOKENS",
    "ModelSize",
    "build_model",
    "train_tokenizer",
]
