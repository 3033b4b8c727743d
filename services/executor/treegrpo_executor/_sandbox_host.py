"""What this host lets the local sandbox enforce, decided once at start: namespaces (a probe run of
the launcher), cgroups, and the disk a node's file system lives on; each missing mechanism is said
once, with what it costs (docs/EXECUTOR.md, the enforcement table)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Awaitable
from pathlib import Path

from treegrpo_executor._cgroup import Cgroups
from treegrpo_executor._host import require_traversable
from treegrpo_executor._launch import encode_spec
from treegrpo_executor.config import ExecutorConfig

log = logging.getLogger("treegrpo_executor._local")  # the sandbox's one logger, as before the split
LAUNCHER = str(Path(__file__).with_name("_launch.py"))


def start_launcher(**kwargs) -> Awaitable[asyncio.subprocess.Process]:
    """The sandbox launcher in an isolated interpreter (-I -S: no site-packages, no user paths),
    reading its spec on stdin."""
    return asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", LAUNCHER, stdin=asyncio.subprocess.PIPE, **kwargs
    )


async def detect(cfg: ExecutorConfig, root: Path, is_root: bool) -> tuple[bool, Cgroups | None, str]:
    """(jailed, cgroups, disk) for a sandbox rooted at `root`, warning of each mechanism missing."""
    root.mkdir(parents=True, exist_ok=True)
    if is_root:
        os.chmod(root, 0o711)
    jailed = is_root and cfg.local.namespaces and await probe_namespaces(cfg.local.jail_dir)
    if is_root and not jailed:
        require_traversable(root)
    cgroups = (
        await asyncio.to_thread(Cgroups.detect, cfg.local.cgroup_root)
        if is_root and cfg.local.cgroups
        else None
    )
    if cgroups is None:
        log.warning(
            "local sandbox WITHOUT cgroups: memory is bounded only by RLIMIT_AS and an RSS poll "
            "(shmem, memfd and tmpfs pages are not counted), sched_setaffinity can widen a node's "
            "CPU set, and processes are bounded only by the per-uid RLIMIT_NPROC"
        )
    disk = cfg.local.disk
    if jailed and disk != "tmpfs" and not (shutil.which("mkfs.ext4") and os.path.exists("/dev/loop-control")):
        log.warning("no mkfs.ext4 or /dev/loop-control: every node's disk is a tmpfs, in RAM")
        disk = "tmpfs"
    if not jailed:
        log.warning(
            "local sandbox WITHOUT namespaces: the workspace is a host folder whose size is polled "
            "(no inode limit), /tmp /run /dev/shm and host unix sockets are shared, "
            "keyrings are not filtered"
        )
    log.info(
        "local sandbox: root=%s jailed=%s uid-drop=%s cgroups=%s disk=%s",
        root,
        jailed,
        is_root,
        cgroups.kind if cgroups else None,
        disk if jailed else "host folder",
    )
    return jailed, cgroups, disk


async def probe_namespaces(jail_dir: str) -> bool:
    spec = {
        "namespaces": True,
        "probe": True,
        "jail_dir": jail_dir,
        "cwd": "/",
        "argv": ["/bin/true"],
        "env": {},
    }
    proc = await start_launcher(stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate(encode_spec(spec))
    if proc.returncode != 0:
        log.warning("namespaces unavailable (%s); sandbox runs without them", err.decode().strip())
    return proc.returncode == 0
