"""Child processes that die with their parent, and processes named so a reused pid cannot pass for them.

A runner killed with SIGKILL (an OOM kill, a CI timeout, `kill -9`) cannot stop its services or
its nats-server; without this they live on as orphans holding ports, stores and CPU. On Linux the
kernel sends the child SIGTERM when its parent dies (PR_SET_PDEATHSIG), which our services and
nats-server both treat as "drain and exit". Elsewhere this is a no-op.

Lease and state files (the shared embedded NATS, treegrpo/embedded/) record a pid with its start
time, so a pid the kernel handed to another process after ours died reads as dead.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# looked up once in the parent: after fork only the call itself runs (no dlopen in the child)
_prctl = _load_prctl()


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for `subprocess.Popen` that ties the child's life to this process."""
    if _prctl is None:
        return None
    parent = os.getpid()

    def _arm() -> None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nobody will signal us
            os._exit(1)

    return _arm


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22), or None if no
    such process runs (gone, or a zombie waiting to be reaped). A pid and its start time name one
    process: a pid the kernel reused for another process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):  # exited; only its exit status is left
        return None
    return int(fields[19])


def running(pid: int, started: int | None = None) -> bool:
    """Is `pid` a live process (and the same one that started at `started`, when given)?"""
    if pid <= 0:
        return False
    if not sys.platform.startswith("linux"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    now = start_time(pid)
    return now is not None and (started is None or now == started)
