"""What a swap and the generations agree on: `VersionGate` lets many generations run at once or one
adapter swap, so every sibling of a group carries the version that produced it; `LoadResult` is
what one attempt to load a version came to."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


class VersionGate:
    """Many generations at once, or one swap: a writer-preferring readers/writer lock."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0

    @contextlib.asynccontextmanager
    async def generating(self):
        async with self._cond:
            await self._cond.wait_for(lambda: not self._writing and self._waiting_writers == 0)
            self._readers += 1
        try:
            yield
        finally:
            async with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def swapping(self):
        async with self._cond:
            self._waiting_writers += 1
            await self._cond.wait_for(lambda: not self._writing and self._readers == 0)
            self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            async with self._cond:
                self._writing = False
                self._cond.notify_all()


@dataclass(frozen=True)
class LoadResult:
    accepted: bool
    reason: str
    version: int  # the version serving after this attempt
    sha256: str
    load_seconds: float = 0.0
