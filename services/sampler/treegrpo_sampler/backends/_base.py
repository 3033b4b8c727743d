"""The one interface every model backend implements (hf, vllm, openai)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable


class EngineLost(RuntimeError):
    """The backend's engine can no longer serve (a colocated engine that could not wake into the
    memory left to it): permanent for this process, so the sampler stops with this reason rather
    than refusing every later version while the run waits for good."""


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 2048
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Completion:
    text: str  # raw completion text (thinking + plan + code fence)
    token_ids: list[int]  # sampled response tokens
    logprobs: list[float]  # raw-distribution logprob of each sampled token (behaviour policy)
    prompt_token_ids: list[int]
    finish_reason: str  # "stop" | "length"


@runtime_checkable
class Backend(Protocol):
    name: str

    @property
    def version(self) -> int:
        """Policy version now serving (0 = the base model, no adapter)."""
        ...

    async def generate(
        self, messages: list[dict[str, str]], n: int, params: SamplingParams
    ) -> list[Completion]:
        """n samples of one prompt (one sibling group), with per-token behaviour logprobs."""
        ...

    def prepare_adapter(self, adapter_dir: Path) -> Path:
        """The folder `load_adapter` is to get for this adapter, made ready ahead of the swap (runs
        in a thread while the version is not yet announced; touches no engine state): the same
        folder where nothing needs doing."""
        ...

    async def load_adapter(self, version: int, adapter_dir: Path) -> None:
        """Serve `version` (a peft adapter folder) from the moment this returns; never a stale one."""
        ...

    async def close(self) -> None: ...
