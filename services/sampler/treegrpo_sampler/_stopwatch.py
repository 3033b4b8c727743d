"""Seconds per stage of one version's way into the engine (received, unpacked, checked, prepared,
announced, swapped), logged as one line per version: where a slow published -> loaded goes."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Stopwatch:
    """Named stages in the order they ran; a stage that raised is timed too."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    async def timed(self, stage: str, work: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await work
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started

    def __str__(self) -> str:
        return ", ".join(f"{stage} {s:.2f} s" for stage, s in self.seconds.items()) or "no stages"
