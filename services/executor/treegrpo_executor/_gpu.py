"""GPU-idle guard: a node that declared a GPU and leaves it idle past a grace period is killed.

The policy (`IdlePolicy`) is pure: it is fed (time, utilisation) samples and answers "kill now?".
Utilisation comes from a `GpuReader`: `NvmlReader` reads NVML (nvidia-ml-py) on a real machine,
`TraceReader` replays a scripted trace in tests. `GpuPool` hands each GPU node its own device, so
the device's utilisation is the node's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class GpuReader(Protocol):
    def utilization(self, device: str) -> float | None:
        """Percent of time a kernel ran over the last sample period (0..100), None if unreadable."""


class NvmlReader:
    """NVML through nvidia-ml-py; device is an index string as in CUDA_VISIBLE_DEVICES."""

    def __init__(self) -> None:
        import pynvml  # imported here: a CPU-only executor never loads NVML

        self._nvml = pynvml
        pynvml.nvmlInit()

    def count(self) -> int:
        return int(self._nvml.nvmlDeviceGetCount())

    def utilization(self, device: str) -> float | None:
        try:
            handle = self._nvml.nvmlDeviceGetHandleByIndex(int(device))
            return float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except (self._nvml.NVMLError, ValueError):
            return None

    def minor(self, device: str) -> int:
        """The /dev/nvidia<minor> file of an NVML index (CUDA uses the same order with
        CUDA_DEVICE_ORDER=PCI_BUS_ID, which the sandbox sets)."""
        return int(self._nvml.nvmlDeviceGetMinorNumber(self._nvml.nvmlDeviceGetHandleByIndex(int(device))))

    def close(self) -> None:
        self._nvml.nvmlShutdown()


class TraceReader:
    """Replays a scripted trace: utilisation as a function of seconds since the reader was made."""

    def __init__(self, trace: Sequence[tuple[float, float]], clock: Callable[[], float] = time.monotonic):
        self.trace = sorted(trace)
        self.clock = clock
        self.t0 = clock()

    def utilization(self, device: str) -> float | None:
        now = self.clock() - self.t0
        value = None
        for at, util in self.trace:
            if at <= now:
                value = util
        return value


@dataclass
class IdlePolicy:
    """Kill when utilisation stayed below `threshold_pct` for `grace_s` without a break."""

    grace_s: float
    threshold_pct: float = 1.0
    samples: list[float] = field(default_factory=list)
    idle_since: float | None = None
    started: float | None = None

    def observe(self, t: float, util: float | None) -> bool:
        if self.started is None:
            self.started = t
        if util is None:  # unreadable counts as idle: a node cannot hide by breaking NVML
            util_busy = False
        else:
            self.samples.append(util)
            util_busy = util >= self.threshold_pct
        if util_busy:
            self.idle_since = None
            return False
        if self.idle_since is None:
            self.idle_since = t
        return t - self.idle_since >= self.grace_s

    @property
    def mean_util(self) -> float | None:
        return round(sum(self.samples) / len(self.samples), 2) if self.samples else None


async def watch(
    reader: GpuReader,
    device: str,
    policy: IdlePolicy,
    poll_s: float,
    on_idle: Callable[[], None],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Sample until cancelled; call `on_idle` once when the policy says so, then stop."""
    while True:
        util = await asyncio.to_thread(reader.utilization, device)
        if policy.observe(clock(), util):
            on_idle()
            return
        await asyncio.sleep(poll_s)


class GpuPool:
    """Exclusive devices for GPU nodes; `acquire` waits for a free one."""

    def __init__(self, devices: Sequence[str]):
        self.free: asyncio.Queue[str] = asyncio.Queue()
        for d in devices:
            self.free.put_nowait(d)
        self.size = len(devices)

    async def acquire(self) -> str | None:
        return await self.free.get() if self.size else None

    def release(self, device: str | None) -> None:
        if device is not None:
            self.free.put_nowait(device)
