"""The `replay` backend: fixed completions instead of sampled ones, scored under the live policy.

For load tests, pipeline benchmarks and the async-overlap measurement, where the time a group takes
to generate and the scripts it produces must be under the experimenter's control. Each group
draws its G completions from `replay.source_dir` with a seeded RNG, sleeps `replay.delay_s` (the
controllable generation time), and records as behaviour logprobs the teacher-forced logprobs of
those tokens under the hf model with the adapter now serving: the learner trains on them exactly as
on sampled completions (they are off-policy samples with correct logprobs). Adapters hot-swap as
in the hf backend.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from treegrpo_sampler.backends._base import Completion, SamplingParams
from treegrpo_sampler.backends._hf import HfBackend


def load_completions(source: Path) -> list[str]:
    texts = []
    for path in sorted(source.iterdir()):
        if path.suffix == ".py":
            texts.append(f"Plan: run the prepared script.\n\n```python\n{path.read_text().rstrip()}\n```")
        elif path.suffix in (".md", ".txt"):
            texts.append(path.read_text())
    if not texts:
        raise FileNotFoundError(f"replay backend: no *.py, *.md or *.txt completions in {source}")
    return texts


class ReplayBackend(HfBackend):
    name = "replay"

    def __init__(self, model_path: str | Path, source_dir: str | Path, delay_s: float = 0.0, **hf_kwargs):
        super().__init__(model_path, **hf_kwargs)
        self.completions = load_completions(Path(source_dir))
        self.delay_s = delay_s

    async def generate(
        self, messages: list[dict[str, str]], n: int, params: SamplingParams
    ) -> list[Completion]:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return await asyncio.to_thread(self._replay, messages, n, params)

    def _replay(self, messages: list[dict[str, str]], n: int, params: SamplingParams) -> list[Completion]:
        import torch

        rng = random.Random(params.seed)
        prompt = self.prompt_ids(messages)
        eos = self.tokenizer.eos_token_id
        out = []
        with self._lock, torch.inference_mode():
            for _ in range(n):
                text = rng.choice(self.completions)
                tokens = self.tokenizer.encode(text, add_special_tokens=False)[
                    : params.max_new_tokens - 1
                ] + [eos]
                ids = torch.tensor([prompt + tokens], dtype=torch.long, device=self.device)
                logits = self.model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
                target = ids[0, len(prompt) :]
                logprobs = torch.log_softmax(logits, -1).gather(-1, target.unsqueeze(-1)).squeeze(-1)
                out.append(
                    Completion(
                        text=self.tokenizer.decode(tokens[:-1]),
                        token_ids=tokens,
                        logprobs=logprobs.tolist(),
                        prompt_token_ids=list(prompt),
                        finish_reason="stop",
                    )
                )
        return out


def build(config) -> ReplayBackend:
    from treegrpo_sampler.backends import resolve_model_path

    if not config.replay.source_dir:
        raise ValueError("backend = 'replay' needs replay.source_dir")
    return ReplayBackend(
        resolve_model_path(config),
        config.replay.source_dir,
        config.replay.delay_s,
        device=config.hf.device,
        dtype=config.hf.dtype,
        torch_threads=config.hf.torch_threads,
    )
