"""One node's host-side state and its reading: staging, cleanup that never raises, classification.

Split from `_local.py` (which orchestrates): these parts hold no event loop logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from treegrpo_executor import _workspace as wsmod
from treegrpo_executor._cgroup import NodeCgroup
from treegrpo_executor._host import SandboxError
from treegrpo_executor._launch import NOTE
from treegrpo_executor._outcome import (
    CRASHED,
    GIB,
    OK,
    TIMEOUT,
    Job,
    Limits,
    Outcome,
    exc_type_from_output,
    signal_name,
    tail,
)
from treegrpo_executor.config import ExecutorConfig

SETUP_FAILED = 125
MEM_SLACK = 48 * 2**20  # the launcher and init, which join the node's memory cgroup before the script


class Run:
    """Book-keeping of one running node: its process, its output, why it was killed."""

    def __init__(self, proc: asyncio.subprocess.Process, keep_bytes: int, cg: NodeCgroup | None):
        self.proc = proc
        self.cg = cg
        self.buf = bytearray()
        self.keep = keep_bytes
        self.total = 0
        self.killed_for: tuple[str, str | None] | None = None  # (status, exc_type)

    def kill(self, status: str, exc_type: str | None) -> None:
        if self.killed_for is None:
            self.killed_for = (status, exc_type)
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)  # the launcher SIGKILLs the jail's init


@dataclass
class Node:
    """What one node holds on the host while it runs."""

    token: str
    ws: wsmod.Workspace | None = None  # unjailed: the host folder
    ws_fd: int | None = None  # unjailed: the folder, opened before the script starts
    disk: str | None = None  # jailed: "tmpfs" or "loop"
    image: Path | None = None  # jailed, disk = "loop" (the pool removes it)
    result: object = None  # jailed: the file init copies the submission into
    cg: NodeCgroup | None = None


def stage(node: Node, job: Job, uid: int | None, public: Path | None, cpus: list[int], backend) -> None:
    """Everything the node needs on the host before its launcher starts (our side: may raise)."""
    lim = job.limits
    if backend.cgroups is not None:
        try:
            ram_disk = disk_bytes(lim) if node.disk == "tmpfs" else 0  # its pages are charged to the node
            node.cg = backend.cgroups.create(
                node.token, cpus, int(lim.mem_gib * GIB) + ram_disk + MEM_SLACK, lim.nproc
            )
        except OSError as exc:
            raise SandboxError(f"cannot make the node's cgroup: {exc}") from exc
    if not backend.jailed:
        node.ws = wsmod.prepare(backend.root, job.code, uid, public)
        node.ws_fd = os.open(node.ws.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        return
    node.result = open(os.memfd_create("tg-result", os.MFD_CLOEXEC), "w+b")  # RAM: no disk to free after


def cleanup(node: Node, keep: bool) -> None:
    """Never raises: whatever the script left, the next node of the slot must run."""
    if node.cg is not None:
        node.cg.remove()
    if node.ws_fd is not None:
        os.close(node.ws_fd)
    if node.result is not None:
        node.result.close()
    if node.ws is not None and not keep:
        wsmod.remove(node.ws.path)


def disk_bytes(lim: Limits) -> int:
    """FSIZE stops one file at `ephemeral`; the file system is a little larger for its metadata."""
    return int(lim.ephemeral_gib * GIB * 1.03) + 8 * 2**20


def inodes(lim: Limits, per_gib: int) -> int:
    return max(1024, int(lim.ephemeral_gib * per_gib))


def classify(
    run: Run, setup_err: str, exec_time: float, job: Job, cfg: ExecutorConfig
) -> tuple[Outcome, list[str]]:
    """The outcome from the exit status, the kill reason and the kernel's counters; notes say which
    limit was hit."""
    text = run.buf.decode("utf-8", "replace")
    term = tail(text, cfg.tail_lines, cfg.tail_bytes)
    rc = run.proc.returncode
    notes = [ln[len(NOTE) :] for ln in setup_err.splitlines() if ln.startswith(NOTE)]
    if run.killed_for == (CRASHED, "ExecutorShutdown"):
        raise SandboxError("executor shut down while the node ran; it will run again")
    oom = run.cg is not None and run.cg.oom_kills() > 0
    if oom:
        notes.append(
            f"memory limit reached: the kernel killed a process of the node (cgroup limit "
            f"{run.cg.mem_bytes / GIB:.2f} GiB: mem {job.limits.mem_gib:g} GiB, a tmpfs disk and "
            f"48 MiB for the launcher; shmem, memfd and tmpfs pages included)"
        )
    if run.cg is not None and run.cg.pids_max_hits() > 0:
        notes.append(
            f"process limit reached: fork/clone failed at {job.limits.nproc} tasks (cgroup pids.max)"
        )
    disk_full = any(n.startswith("disk full") for n in notes)
    if run.killed_for is not None:
        status, exc = run.killed_for
        return Outcome(status=status, exc_type=exc, exec_time=exec_time, term_tail=term), notes
    if rc == SETUP_FAILED and "treegrpo sandbox setup failed" in setup_err:
        # the launcher's own lines ("treegrpo elapsed ...") are bookkeeping, not the reason
        said = [ln for ln in setup_err.strip().splitlines() if not ln.startswith("treegrpo elapsed")]
        raise SandboxError("\n".join(said)[-500:])
    if rc == 128 + signal.SIGXCPU:
        return Outcome(status=TIMEOUT, exec_time=exec_time, term_tail=term), notes
    if rc != 0:
        exc = ("MemoryError" if oom and rc == 128 + signal.SIGKILL else None) or exc_type_from_output(text)
        if disk_full and exc in (None, "OSError"):
            exc = "DiskQuotaExceeded"
        exc = exc or signal_name(rc) or "SystemExit"
        return Outcome(status=CRASHED, exc_type=exc, exec_time=exec_time, term_tail=term), notes
    return Outcome(status=OK, exec_time=exec_time, term_tail=term), notes


def result_bytes(result) -> bytes | None:
    """What init copied out: a marker byte (1: a submission follows), then the submission."""
    result.seek(0)
    data = result.read(wsmod.MAX_SUBMISSION + 2)
    return data[1:] if data[:1] == b"\1" else None
