"""Host-side helpers of the local sandbox: CPU sets, the interpreter's folders, process sweeps."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path

import psutil


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the script): the node is retried later."""


def require_traversable(root: Path) -> None:
    """Without the jail the script (another uid) reaches its workspace by the real path."""
    for parent in [root, *root.parents]:
        if not parent.stat().st_mode & 0o001:
            raise SandboxError(
                f"workspace root {root}: {parent} is not traversable by the sandbox uid "
                f"(chmod o+x it, or pick another local.workspace_root)"
            )


def interpreter_trees(python: str) -> list[str]:
    """Folders the sandboxed interpreter needs: its installation, and (for ours) the venv and the
    base installation the venv points to."""
    real = os.path.realpath(python)
    trees = {os.path.dirname(os.path.dirname(real)), os.path.dirname(os.path.dirname(python))}
    if real == os.path.realpath(sys.executable):
        trees |= {
            os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
        }
    return sorted(t for t in trees if t != "/")


def cpu_set(slot: int, cpu: float) -> list[int]:
    avail = sorted(os.sched_getaffinity(0))
    n = max(1, min(len(avail), int(math.ceil(cpu))))
    start = (slot * n) % len(avail)
    return [avail[(start + i) % len(avail)] for i in range(n)]


def tree_rss(pid: int) -> int:
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def kill_uid(uid: int) -> None:
    for p in psutil.process_iter(["uids"]):
        with contextlib.suppress(psutil.Error):
            if p.info["uids"] and p.info["uids"].real == uid:
                p.kill()


def host_unix_sockets() -> list[str]:
    """Paths of the unix sockets bound in this network namespace (dbus, journald, docker, ...):
    the jail puts /dev/null over each, so no host daemon is reachable by path. (Abstract sockets
    need no mask: they belong to a network namespace, and the jail has its own.)"""
    found = set()
    try:
        with open("/proc/net/unix") as fh:
            next(fh, None)
            for line in fh:
                parts = line.split(None, 7)
                if len(parts) == 8 and parts[7].startswith("/"):
                    found.add(parts[7].rstrip("\n"))
    except OSError:
        return []
    return sorted(found)
