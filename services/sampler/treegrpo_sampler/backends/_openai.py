"""`openai` backend: any OpenAI-compatible server (`vllm serve`, SGLang) over HTTP (httpx, async).

One chat completion per sibling group (`n` samples) with `logprobs`. Token ids come from vLLM's
`return_token_ids` extension (`choices[i].token_ids`, `prompt_token_ids`); a server without it
gives them through `return_tokens_as_token_ids` (logprob tokens spelled `token_id:N`) and the
prompt through `POST /tokenize`. The logprobs are the server's: start `vllm serve` with
`--logprobs-mode raw_logprobs` (vLLM's default) so they are the raw distribution's, and with
`--generation-config vllm` so the checkpoint's generation_config does not add a top-k the
sampler did not ask for (we also send `top_k`, configurable).

New policy versions go through `POST /v1/load_lora_adapter` (the server needs
`--enable-lora --max-lora-rank R` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`), each under a new
name `<prefix>-v<version>-<instance>-<n>` (the instance tag keeps a restarted sampler from colliding
with names a long-running server already holds), and requests name that adapter as their `model`.
The adapter folder must be readable by the server at the path given (same machine or a shared
volume; `server_adapter_root` rewrites the parent folder). Retired adapters are unloaded once their
last request is done. With `--no-train` no adapter is ever loaded: version 0, the server's model.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from treegrpo_sampler.backends._base import Completion, SamplingParams
from treegrpo_sampler.config import OpenAISettings, SamplerConfig

log = logging.getLogger(__name__)
RETRY_STATUS = {408, 429, 500, 502, 503, 504}
BUSY_STATUS = {429, 503}  # for adapter loads: a 500 there is the server rejecting the adapter


def build(config: SamplerConfig) -> OpenAIBackend:
    """The backend from the sampler's config (its `openai` section).

    The model is `openai.served_model`, else the server's own base model (GET /v1/models): the
    sampler's `model` folder names a local checkpoint, which need not be the server's name for it.
    """
    return OpenAIBackend(config.openai.served_model, config.openai)


class OpenAIBackend:
    """The `Backend` protocol over HTTP. `model` is the served base model name ('' = ask the server)."""

    name = "openai"

    def __init__(self, model: str = "", settings: OpenAISettings | None = None):
        self.settings = s = settings or OpenAISettings()
        self.base_model = s.served_model or model
        root = s.base_url.rstrip("/")
        self.root = root[:-3] if root.endswith("/v1") else root
        self._client = httpx.AsyncClient(
            base_url=self.root,
            headers={"Authorization": f"Bearer {s.api_key}"},
            timeout=httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s),
            limits=httpx.Limits(max_connections=s.max_connections),
        )
        self._version = 0
        self._adapter: str | None = None
        self._loads = itertools.count(1)
        self._tag = secrets.token_hex(3)
        self._load_lock = asyncio.Lock()
        self._inflight: Counter[str] = Counter()
        self._retired: set[str] = set()
        self.last_swap_seconds = 0.0

    @property
    def version(self) -> int:
        return self._version

    @property
    def lora_name(self) -> str | None:
        return self._adapter

    async def _post(
        self, path: str, body: dict[str, Any], retry_status: set[int] = RETRY_STATUS
    ) -> httpx.Response:
        """POST with retries on connection errors and `retry_status`; other answers are returned."""
        delay = self.settings.retry_backoff_s
        for attempt in range(self.settings.retries + 1):
            try:
                resp = await self._client.post(path, json=body)
                if resp.status_code not in retry_status:
                    return resp
                problem = f"HTTP {resp.status_code}: {resp.text[:300]}"
            except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, httpx.PoolTimeout) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            if attempt < self.settings.retries:
                log.warning("openai %s failed (%s); retry in %.1fs", path, problem, delay)
                await asyncio.sleep(delay)
                delay *= 2
        raise ConnectionError(f"{self.root}{path} failed after {self.settings.retries + 1} tries: {problem}")

    async def _base_model(self) -> str:
        if not self.base_model:
            resp = await self._client.get("/v1/models")
            resp.raise_for_status()
            bases = [m["id"] for m in resp.json()["data"] if not m.get("parent")]
            if not bases:
                raise ValueError(f"{self.root}/v1/models lists no base model")
            self.base_model = bases[0]
        return self.base_model

    async def generate(
        self, messages: list[dict[str, str]], n: int, params: SamplingParams
    ) -> list[Completion]:
        base = await self._base_model()
        adapter = self._adapter  # pinned: a swap during this request does not touch it
        body: dict[str, Any] = {
            "model": adapter or base,
            "messages": messages,
            "n": n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "logprobs": True,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if self.settings.top_k is not None:
            body["top_k"] = self.settings.top_k
        key = adapter or ""
        self._inflight[key] += 1
        try:
            resp = await self._post("/v1/chat/completions", body)
            if resp.status_code != 200:
                raise ValueError(f"chat completion refused: HTTP {resp.status_code}: {resp.text[:500]}")
            data = resp.json()
            prompt_ids = data.get("prompt_token_ids") or await self._tokenize(base, messages)
        finally:
            self._inflight[key] -= 1
            await self._drop_retired()
        choices = sorted(data["choices"], key=lambda c: c["index"])
        if len(choices) != n:
            raise ValueError(f"server returned {len(choices)} of {n} samples")
        return [self._completion(c, prompt_ids) for c in choices]

    async def _tokenize(self, model: str, messages: list[dict[str, str]]) -> list[int]:
        resp = await self._post(
            "/tokenize", {"model": model, "messages": messages, "add_generation_prompt": True}
        )
        if resp.status_code == 200:
            return list(resp.json().get("tokens") or [])
        if self.settings.token_ids == "required":
            raise ValueError(
                f"no prompt token ids: the response had none and /tokenize gave HTTP {resp.status_code}"
            )
        return []

    def _completion(self, choice: dict[str, Any], prompt_ids: list[int]) -> Completion:
        message = choice.get("message") or {}
        text = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:  # a server-side reasoning parser split the thinking off: put the block back
            text = f"<think>{reasoning}</think>{text}"
        entries = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [float(e["logprob"]) for e in entries]
        token_ids = choice.get("token_ids")
        if token_ids is None and entries and all(e["token"].startswith("token_id:") for e in entries):
            token_ids = [int(e["token"].split(":", 1)[1]) for e in entries]
        if token_ids is None or len(token_ids) != len(logprobs):
            if self.settings.token_ids == "required":
                raise ValueError(
                    f"server gave {None if token_ids is None else len(token_ids)} token ids "
                    f"for {len(logprobs)} logprobs; it must support logprobs + token ids"
                )
            token_ids, logprobs = [], []
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(
            text=text,
            token_ids=list(token_ids),
            logprobs=logprobs,
            prompt_token_ids=list(prompt_ids),
            finish_reason=finish,
        )

    def prepare_adapter(self, adapter_dir: Path) -> Path:
        return Path(adapter_dir)  # the server reads the folder as published

    async def load_adapter(self, version: int, adapter_dir: Path) -> None:
        folder = Path(adapter_dir).resolve()
        if not (folder / "adapter_config.json").is_file():
            raise ValueError(f"adapter v{version}: {folder} has no adapter_config.json")
        root = self.settings.server_adapter_root
        server_path = str(Path(root) / folder.name) if root else str(folder)
        started = time.perf_counter()
        async with self._load_lock:
            name = f"{self.settings.lora_name_prefix}-v{version}-{self._tag}-{next(self._loads)}"
            resp = await self._post(
                "/v1/load_lora_adapter", {"lora_name": name, "lora_path": server_path}, BUSY_STATUS
            )
            if resp.status_code != 200:
                raise ValueError(
                    f"server refused adapter v{version} ({server_path}): "
                    f"HTTP {resp.status_code}: {resp.text[:500]}"
                )
            old, self._adapter, self._version = self._adapter, name, version
            if old is not None:
                self._retired.add(old)
        self.last_swap_seconds = time.perf_counter() - started
        log.info("openai: serving v%d as %s (%.2fs)", version, name, self.last_swap_seconds)
        await self._drop_retired()

    async def _drop_retired(self) -> None:
        for name in [a for a in self._retired if self._inflight[a] == 0]:
            self._retired.discard(name)
            try:
                resp = await self._client.post("/v1/unload_lora_adapter", json={"lora_name": name})
                if resp.status_code != 200:
                    log.warning("openai: unloading %s gave HTTP %d", name, resp.status_code)
            except httpx.HTTPError as exc:  # an adapter left loaded only costs server memory
                log.warning("openai: unloading %s failed: %s", name, exc)

    async def close(self) -> None:
        await self._client.aclose()
