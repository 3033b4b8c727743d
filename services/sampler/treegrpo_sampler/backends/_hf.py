"""The `hf` backend: transformers + peft on one device, the embedded default on CPU.

The G siblings of a group share one prompt, so one `generate` call on the prompt repeated G times
samples the whole group without padding, after one prefill of the prompt whose KV cache is shared.
The behaviour logprob of each sampled token comes from the raw logits (`output_logits=True`,
log_softmax, gather), not from the processed scores that temperature / top-p / EOS masking change.
Adapters are hot-swapped in place: each version is loaded under its own adapter name, made active,
and the previous one deleted. Generation and swaps run in a worker thread under one lock, so the
event loop keeps heartbeating and a group is never sampled half with one version and half with
another.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

from treegrpo_sampler.backends._base import Completion, SamplingParams

log = logging.getLogger(__name__)


def _adapter_name(version: int) -> str:
    return f"v{version}"


class HfBackend:
    name = "hf"

    def __init__(
        self, model_path: str | Path, device: str = "cpu", dtype: str = "float32", torch_threads: int = 0
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if torch_threads:
            torch.set_num_threads(torch_threads)
        self.model_path = str(model_path)
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=getattr(torch, dtype))
        self.model = model.to(self.device).eval()
        self._lock = threading.Lock()
        self._version = 0
        self._adapter: str | None = None
        self.last_swap_seconds = 0.0

    @property
    def version(self) -> int:
        return self._version

    # ---- sampling ---------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if hasattr(out, "keys") else out)

    async def generate(
        self, messages: list[dict[str, str]], n: int, params: SamplingParams
    ) -> list[Completion]:
        return await asyncio.to_thread(self._generate, messages, n, params)

    def _generate(self, messages: list[dict[str, str]], n: int, params: SamplingParams) -> list[Completion]:
        import torch

        prompt = self.prompt_ids(messages)
        with self._lock, torch.inference_mode():
            if params.seed is not None:
                torch.manual_seed(params.seed)
            ids = torch.tensor([prompt] * n, dtype=torch.long, device=self.device)
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                past_key_values=self._shared_prefix(ids, n),
                do_sample=True,
                temperature=params.temperature,
                top_p=params.top_p,
                top_k=0,
                max_new_tokens=params.max_new_tokens,
                return_dict_in_generate=True,
                output_logits=True,
                eos_token_id=self._eos_ids(),
                pad_token_id=self.tokenizer.pad_token_id,
            )
            new = out.sequences[:, len(prompt) :]
            logits = torch.stack(out.logits, dim=1).float()  # (n, T, V): raw, before any processor
            logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return [self._completion(prompt, new[i].tolist(), logprobs[i].tolist(), params) for i in range(n)]

    def _shared_prefix(self, ids, n: int):
        """The prompt's KV cache computed once and repeated for the n siblings (all but the last
        token, which `generate` feeds itself). Identical samples, n times less prefill work: on a
        CPU the prefill of 16 copies of a long prompt otherwise dominates the group's time."""
        if n == 1 or ids.shape[1] < 2:
            return None
        cache = self.model(input_ids=ids[:1, :-1], use_cache=True).past_key_values
        if not hasattr(cache, "batch_repeat_interleave"):
            return None
        try:
            cache.batch_repeat_interleave(n)
        except AttributeError:  # hybrid models (Qwen3.5 linear attention) cannot repeat: full prefill
            return None
        return cache

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        end = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        if isinstance(end, int) and end != self.tokenizer.unk_token_id:
            ids.add(end)
        return sorted(i for i in ids if i is not None)

    def _completion(
        self, prompt: list[int], tokens: list[int], logprobs: list[float], params: SamplingParams
    ) -> Completion:
        eos = set(self._eos_ids())
        cut = next((i + 1 for i, t in enumerate(tokens) if t in eos), None)  # keep the EOS: it was sampled
        finish = "stop" if cut is not None else "length"
        cut = cut if cut is not None else len(tokens)
        tokens, logprobs = tokens[:cut], logprobs[:cut]
        text = self.tokenizer.decode(tokens, skip_special_tokens=False)
        for special in (self.tokenizer.eos_token, "<|endoftext|>"):
            if text.endswith(special):
                text = text[: -len(special)]
        for stop in params.stop:
            if stop and stop in text:
                text, finish = text[: text.index(stop)], "stop"
        return Completion(
            text=text,
            token_ids=tokens,
            logprobs=logprobs,
            prompt_token_ids=list(prompt),
            finish_reason=finish,
        )

    # ---- adapters ---------------------------------------------------------------------------
    def prepare_adapter(self, adapter_dir: Path) -> Path:
        return Path(adapter_dir)  # peft loads the learner's names as they are

    async def load_adapter(self, version: int, adapter_dir: Path) -> None:
        await asyncio.to_thread(self._load_adapter, version, Path(adapter_dir))

    def _load_adapter(self, version: int, adapter_dir: Path) -> None:
        from peft import PeftModel

        started = time.perf_counter()
        name = _adapter_name(version)
        with self._lock:
            if self._adapter is None:
                self.model = PeftModel.from_pretrained(
                    self.model, str(adapter_dir), adapter_name=name, is_trainable=False
                ).eval()
            else:
                if name == self._adapter:  # re-load of the serving version: swap through a fresh name
                    name = f"{name}_{int(time.time() * 1000)}"
                try:
                    self.model.load_adapter(str(adapter_dir), adapter_name=name, is_trainable=False)
                except Exception:
                    if (
                        name in self.model.peft_config
                    ):  # drop a half-registered adapter; the old one serves on
                        self.model.delete_adapter(name)
                    raise
                self.model.set_adapter(name)
                self.model.delete_adapter(self._adapter)
            self._adapter, self._version = name, version
        self.last_swap_seconds = time.perf_counter() - started
        log.info(
            "hf backend serves version %d (%s) after %.3fs", version, adapter_dir, self.last_swap_seconds
        )

    async def close(self) -> None:
        with self._lock:
            self.model = None
