"""Node file system images, made ahead of need and removed off the node's path.

`mkfs.ext4` of a sparse image costs tens of milliseconds and unlinking a used image as much again
(here the host's ext4 is mounted with `discard`: freeing blocks waits for the device). Neither has
to delay a node: after each `take`, a spare of the same size is made in the background for the
next node, and a finished node's image is unlinked in the background. A spare is never mounted
before it is taken, so every node still gets a file system nobody used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from treegrpo_executor import _workspace as wsmod

log = logging.getLogger(__name__)


class ImagePool:
    def __init__(self, root: Path, spares: int):
        self.root = root
        self.keep = spares
        self.spares: dict[tuple[int, int], list[Path]] = {}
        self.making: dict[tuple[int, int], int] = {}
        self.tasks: set[asyncio.Task] = set()

    async def take(self, size: int, inodes: int) -> Path:
        """A fresh image of `size` bytes and `inodes` inodes (WorkspaceError if none can be made)."""
        key = (size, inodes)
        ready = self.spares.get(key)
        img = ready.pop() if ready else await asyncio.to_thread(wsmod.make_image, self.root, size, inodes)
        if len(self.spares.get(key, ())) + self.making.get(key, 0) < self.keep:
            self._spawn(self._make_spare(key))
        return img

    async def _make_spare(self, key: tuple[int, int]) -> None:
        self.making[key] = self.making.get(key, 0) + 1
        try:
            img = await asyncio.to_thread(wsmod.make_image, self.root, *key)
            self.spares.setdefault(key, []).append(img)
        except wsmod.WorkspaceError as exc:  # the next take makes its own, and says why if it cannot
            log.warning("spare image: %s", exc)
        finally:
            self.making[key] -= 1

    def discard(self, img: Path) -> None:
        self._spawn(asyncio.to_thread(wsmod.remove, img))

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def settle(self) -> None:
        """Wait for the background work in flight."""
        with contextlib.suppress(Exception):
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def close(self) -> None:
        """Wait for the background work, then remove the spares."""
        await self.settle()
        for imgs in self.spares.values():
            for img in imgs:
                await asyncio.to_thread(wsmod.remove, img)
        self.spares.clear()
