"""The runner's loop: follow the run's events, print faults as they begin and clear, decide the end.

The run ends `completed` once rollout is done and training caught up; `failed` on a service's
permanent fault, on giving up restarts, or past `runner.timeout_s`; `bus_down` (recorded as failed,
resumable) once the bus took no writes for `runner.bus_wait_s` (`_faults.FaultWatch.stop_reason`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live

from treegrpo.bus import Bus
from treegrpo.runner._config import RunFile
from treegrpo.runner._faults import FaultWatch
from treegrpo.runner._nats import NatsHandle
from treegrpo.runner._progress import Progress
from treegrpo.runner._supervisor import Supervisor

log = logging.getLogger(__name__)
BUS_DOWN = "bus_down"  # stopped because the bus took no writes for runner.bus_wait_s: resumable
# After a service's permanent fault the others still hold facts in flight (the executor's last
# masked node on its way to the grader): the run ends once they are graded, or after this long.
SETTLE_S = 15.0


async def watch(bus: Bus, run_id: str, progress: Progress, stop: asyncio.Event) -> None:
    """Fold the run's events (from its first) into `progress` until `stop`."""
    async for event in bus.follow(run_id, stop):
        progress.apply(event)


async def watch_forever(bus: Bus, run_id: str, progress: Progress, stop: asyncio.Event) -> None:
    """The watcher re-subscribes after a NATS restart; `progress` ignores facts it already saw."""
    while not stop.is_set():
        try:
            await watch(bus, run_id, progress, stop)
        except Exception as exc:  # server restarts, slow consumers: start over, dedup by id
            log.debug("watcher restarting after %s", exc)
            await asyncio.sleep(0.5)


async def finish_step(progress: Progress, rf: RunFile) -> bool:
    """True once rollout is complete and training caught up (or stopped coming)."""
    if not progress.rollout_done:
        return False
    if progress.training_done:
        return True
    if not progress.rollout_done_at:
        progress.rollout_done_at = time.time()
    quiet_since = max(progress.last_step_at, progress.rollout_done_at, progress.started)
    return time.time() - quiet_since > rf.runner.learner_idle_s


@dataclass
class Loop:
    """What one turn looks at: the run file, the service processes, the bus, the faults, the progress."""

    rf: RunFile
    sup: Supervisor
    nats: NatsHandle
    faults: FaultWatch
    progress: Progress
    console: Console
    failed_at: float = 0.0  # when a service's permanent fault was first seen (0: none yet)

    def services(self) -> dict[str, tuple[bool, int, str]]:
        return {n: (p.alive, p.restarts, self.sup.state(p)) for n, p in self.sup.procs.items()}

    async def run(self) -> tuple[str, str]:
        """(outcome, reason) once the run completed, failed or stopped for the bus."""
        deadline = time.time() + self.rf.runner.timeout_s if self.rf.runner.timeout_s else float("inf")
        table = self.progress.table(self.services(), self.faults.lines)
        live = Live(table, console=self.console, refresh_per_second=2, auto_refresh=self.rf.runner.live)
        try:
            with live:
                while True:
                    await asyncio.sleep(0.5)
                    self.turn(live)
                    verdict = await self.decide(deadline)
                    if verdict is not None:
                        return verdict
        finally:
            if not self.console.is_terminal:  # Rich leaves the last frame's line open off a terminal
                self.console.line()

    def turn(self, live: Live) -> None:
        """Print what began or cleared since the last turn; redraw the table with what lasts."""
        for note in [*self.nats.check(), *self.sup.check(), *self.sup.error_notes(), *self.faults.check()]:
            self.console.print(f"[yellow]{note}[/]", soft_wrap=True)
        for note in self.progress.take_notices():  # one-off facts: a learner restore that lost state
            self.console.print(f"[yellow]{note}[/]", soft_wrap=True)
        live.update(self.progress.table(self.services(), self.faults.lines))

    def settled(self) -> bool:
        """After a service's permanent fault: True once every recorded execution is graded (looked
        at from a second after the fault on, so the watcher has the failed service's last facts),
        `SETTLE_S` after it, or at once when the grader is what failed (nothing else grades)."""
        now = time.time()
        self.failed_at = self.failed_at or now
        waited = now - self.failed_at
        if "grader" in self.sup.failures or waited > SETTLE_S:
            return True
        return waited >= 1.0 and not self.progress.ungraded

    async def decide(self, deadline: float) -> tuple[str, str] | None:
        sup, rf = self.sup, self.rf
        if sup.failures and self.settled():
            return "failed", "; ".join(f"{n}: {why}" for n, why in sup.failures.items())
        if sup.gave_up:
            self.console.print(f"[red]gave up on {', '.join(sup.gave_up)}; see {sup.run_dir / 'logs'}[/]")
            return "failed", f"gave up restarting {', '.join(sup.gave_up)} (runner.max_restarts)"
        if await finish_step(self.progress, rf):
            return "completed", "every round complete and trained"
        fault = self.faults.stop_reason()
        if fault is not None:
            waited = time.time() - self.faults.down_since()
            fix = f"; {fault.fix}" if fault.fix else ""
            return BUS_DOWN, f"{fault.what}, no writes for {waited:,.0f}s (runner.bus_wait_s){fix}"
        if time.time() > deadline:
            self.console.print(f"[red]run exceeded timeout_s={rf.runner.timeout_s}[/]")
            return "failed", f"exceeded runner.timeout_s={rf.runner.timeout_s:g}"
        return None
