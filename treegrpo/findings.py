"""What is wrong right now, in words a person acts on: one vocabulary for the runner's screen and
`treegrpo health`.

A `Finding` is a condition that holds now: `key` names it (the screen says it once when it begins
and once when it clears), `what` says what happened, `fix` what the user does about it, `after`
what then happens by itself. `bus=True` marks a finding that means the bus takes no writes: the
runner waits `runner.bus_wait_s` for those to clear, then stops the run, resumable, naming the
first one's cause and fix on one line.

Sources, each a plain function over what its caller can see:

- `disk_findings`: free space under $TREEGRPO_HOME and the NATS store
- `store_findings`: the embedded server's keeper (keeper.json): store write errors, a server down
- `connection_findings`: the caller's own NATS connection
- `heartbeat_findings`: the services' heartbeats (treegrpo.health.Heartbeat)

To add a line for a new fault a service knows about: put it in the service's heartbeat (a field of
`Heartbeat`, set in `Service._write_heartbeat`) and add a rule to `heartbeat_findings`; the
runner's screen and `treegrpo health` then both show it.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from treegrpo.embedded._state import KeeperState, NatsPaths, keeper_running, live_leases, read_state
from treegrpo.health import Heartbeat, health_dir, read_heartbeats

NO_SPACE = "no space left on device"


@dataclass(frozen=True)
class Finding:
    key: str
    what: str
    fix: str = ""  # what to do ("" when nothing needs doing)
    after: str = ""  # what happens by itself once it is fixed
    since: float = 0.0  # unix time it began (0: unknown)
    bus: bool = False  # the bus takes no writes while this holds

    def line(self, now: float | None = None) -> str:
        age = f" (for {(now or time.time()) - self.since:,.0f}s)" if self.since else ""
        return "; ".join(p for p in (f"{self.what}{age}", self.fix, self.after) if p)


def disk_findings(folders: dict[str, Path], min_free_mb: float) -> list[Finding]:
    out = []
    for what, folder in folders.items():
        probe = folder if folder.exists() else folder.parent
        try:
            free_mb = shutil.disk_usage(probe).free / 1e6
        except OSError:
            continue
        if free_mb < min_free_mb:
            out.append(
                Finding(
                    f"disk:{folder}",
                    f"low disk: {free_mb:,.0f} MB free under {what} {folder} "
                    f"(< runner.min_free_mb = {min_free_mb:,.0f})",
                    "free space there: a full disk stops NATS and the learner's checkpoints",
                )
            )
    return out


def store_findings(state: KeeperState | None, keeper_log: Path | None = None) -> list[Finding]:
    """The embedded server's own view: a store that fails its writes, a server that is down."""
    if state is None:
        return []
    out = []
    if state.write_error and NO_SPACE in state.write_error.lower():
        free = f"{state.free_mb:,.0f} MB free" if state.free_mb >= 0 else "no space left"
        out.append(
            Finding(
                "store:full",
                f"disk full: NATS cannot store events under {state.store} ({free})",
                "free space on that disk",
                f"the server restarts and the run goes on by itself once {state.recover_free_mb:,.0f} MB "
                "are free",
                state.write_error_since,
                bus=True,
            )
        )
    elif state.write_error:
        out.append(
            Finding(
                "store:error",
                f"NATS cannot write its store under {state.store}: {state.write_error}",
                "check that disk (read-only? failing?)",
                "the server restarts and the run goes on by itself once it can write",
                state.write_error_since,
                bus=True,
            )
        )
    if state.server_down:
        out.append(
            Finding(
                "store:down",
                f"the embedded nats-server is down: {state.server_down}",
                f"see {keeper_log}" if keeper_log else "",
                bus=True,
            )
        )
    return out


def connection_findings(url: str, down_since: float, embedded: bool) -> list[Finding]:
    if not down_since:
        return []
    return [
        Finding(
            "nats:unreachable",
            f"NATS at {url} is unreachable",
            "" if embedded else "start it again",
            "the embedded server is restarted by its keeper; the services reconnect by themselves"
            if embedded
            else "the services reconnect by themselves once it is back",
            down_since,
            bus=True,
        )
    ]


def heartbeat_findings(beats: list[Heartbeat]) -> list[Finding]:
    """Rules over the services' heartbeats (add new ones here)."""
    failing = sorted((b for b in beats if b.bus_error), key=lambda b: b.bus_error_since)
    out = []
    if failing:
        names = ", ".join(b.service for b in failing)
        out.append(
            Finding(
                "services:bus-writes",
                f"{names} cannot write to the bus: {failing[0].bus_error}",
                since=failing[0].bus_error_since,
                after=("they retry by themselves" if len(failing) > 1 else "it retries by itself")
                + "; nothing is lost",
                bus=True,
            )
        )
    return out


def home_findings(home: Path) -> tuple[list[str], list[Finding]]:
    """For `treegrpo health`: who shares the home's embedded server (lines to print), and what is
    wrong with it and with the services of the runs on it."""
    paths = NatsPaths(home / "nats")
    state = read_state(paths)
    leases = live_leases(paths, prune=False)
    if not keeper_running(state):
        if not paths.store.exists():
            return [], []
        return [
            f"no embedded nats-server runs for {home} now: it runs while a `treegrpo run`, `report` or "
            "`nats up` uses it"
        ], []
    users = ", ".join(f"{lease.what} (pid {lease.pid})" for lease in leases) or "nobody (stopping)"
    notes = [f"embedded nats-server {state.url} (store {state.store}); in use by: {users}"]
    if state.restarts:
        notes.append(f"it was restarted {state.restarts} time(s), the latest: {state.last_restart}")
    found = store_findings(state, paths.keeper_log)
    for lease in leases:
        if lease.run_id:
            beats = read_heartbeats(sorted(health_dir(home / "runs" / lease.run_id).glob("*.json")))
            found += [
                replace(f, what=f"run {lease.run_id}: {f.what}", key=f"{lease.run_id}:{f.key}")
                for f in heartbeat_findings(beats)
            ]
    return notes, found
