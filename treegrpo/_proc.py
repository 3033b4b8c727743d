"""Child processes that die with their parent.

A runner killed with SIGKILL (an OOM kill, a CI timeout, `kill -9`) cannot stop its services or
its nats-server; without this they live on as orphans holding ports, stores and CPU. On Linux the
kernel sends the child SIGTERM when its parent dies (PR_SET_PDEATHSIG), which our services and
nats-server both treat as "drain and exit". Elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

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
