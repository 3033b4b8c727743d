"""Local sandbox backend: each node runs as a jailed, unprivileged process tree on this machine.

What is enforced where (docs/EXECUTOR.md has the full table):
- the kernel, per node: a cgroup (`_cgroup.py`: memory with shmem/tmpfs, cpuset, pids), its own
  file system with a byte and an inode limit (`_jail.py`), namespaces, a seccomp filter;
- launcher (`_launch.py`, `_jail.py`): the jail's mounts, the slot's uid/gid, rlimits (AS for CPU
  nodes, NPROC, FSIZE, CPU, NOFILE, CORE), the submission copied out without following links;
- this module: the wall-clock timeout, the output cap, the GPU-idle guard, the final kill of
  everything the node started, and (only where the kernel mechanism is missing) polling of the
  workspace size and resident memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path

from treegrpo_executor import _workspace as wsmod
from treegrpo_executor._cgroup import Cgroups
from treegrpo_executor._gpu import GpuPool, GpuReader, IdlePolicy, watch
from treegrpo_executor._host import cpu_set, kill_uid, tree_rss
from treegrpo_executor._images import ImagePool
from treegrpo_executor._launch import ELAPSED_MARK, encode_spec
from treegrpo_executor._node import (
    Node,
    Run,
    classify,
    cleanup,
    disk_bytes,
    inodes,
    result_bytes,
    stage,
)
from treegrpo_executor._outcome import (
    CRASHED,
    GIB,
    NO_SUBMISSION,
    OK,
    TIMEOUT,
    Job,
    Outcome,
    Timings,
    tail,
)
from treegrpo_executor._sandbox_host import detect, start_launcher
from treegrpo_executor._spec import Placement, Sandbox, launch_spec
from treegrpo_executor.config import ExecutorConfig

log = logging.getLogger(__name__)


class LocalBackend:
    name = "local"

    def __init__(self, cfg: ExecutorConfig, reader: GpuReader | None = None):
        self.cfg = cfg
        self.root = Path(cfg.local.workspace_root)
        self.is_root = os.geteuid() == 0
        self.jailed = False
        self.cgroups: Cgroups | None = None
        self.disk = cfg.local.disk
        self.slots: asyncio.Queue[int] = asyncio.Queue()
        for k in range(cfg.max_concurrency):
            self.slots.put_nowait(k)
        self.gpus = GpuPool(cfg.local.gpu_devices)
        self.reader = reader
        self.running: dict[str, Run] = {}
        self.host = socket.gethostname()
        self.python = cfg.local.python or sys.executable
        self.images = ImagePool(self.root, spares=cfg.max_concurrency)

    async def start(self) -> None:
        """What this host's kernel and privileges allow (`_sandbox_host.detect`), decided once."""
        self.jailed, self.cgroups, self.disk = await detect(self.cfg, self.root, self.is_root)

    async def run(self, job: Job) -> Outcome:
        t0 = time.monotonic()
        slot = await self.slots.get()
        device = None
        node = Node(wsmod.token())
        try:
            if job.limits.gpu:
                device = await self.gpus.acquire()
            t_pending = time.monotonic() - t0
            uid = self.cfg.local.sandbox_uid_base + slot if self.is_root else None
            public = wsmod.public_dir(self.cfg.public_data_roots, job.task)
            node.disk = self._disk_kind(job.limits)
            await asyncio.to_thread(stage, node, job, uid, public, cpu_set(slot, job.limits.cpu), self)
            if node.disk == "loop":
                node.image = await self.images.take(
                    disk_bytes(job.limits), inodes(job.limits, self.cfg.local.inodes_per_gib)
                )
            t_stage = time.monotonic() - t0 - t_pending
            out = await self._execute_and_collect(job, node, uid, slot, device, public)
            out.timings.pending, out.timings.stage = t_pending, t_stage
            out.where = f"local:{self.host}/slot{slot}"
            return out
        finally:
            await asyncio.to_thread(cleanup, node, self.cfg.local.keep_workspaces)
            if node.image is not None and not self.cfg.local.keep_workspaces:
                self.images.discard(node.image)
            self.gpus.release(device)
            self.slots.put_nowait(slot)

    async def _execute_and_collect(
        self, job: Job, node: Node, uid: int | None, slot: int, device: str | None, public: Path | None
    ) -> Outcome:
        out, notes = await self._execute(job, node, uid, slot, device, public)
        t_ret = time.monotonic()
        if out.status == OK:
            if self.jailed:
                out.submission = await asyncio.to_thread(result_bytes, node.result)
            else:
                out.submission = await asyncio.to_thread(wsmod.read_submission, node.ws_fd)
            if out.submission is None:
                out.status = NO_SUBMISSION
        if notes:
            out.term_tail = tail(
                out.term_tail + "".join(f"\n[sandbox] {n}" for n in notes),
                self.cfg.tail_lines,
                self.cfg.tail_bytes,
            )
        out.timings = Timings(exec=out.exec_time, retrieve=time.monotonic() - t_ret)
        return out

    def _disk_kind(self, lim) -> str | None:
        if not self.jailed:
            return None
        if self.disk == "auto":
            return "tmpfs" if lim.ephemeral_gib <= self.cfg.local.tmpfs_max_gib else "loop"
        return self.disk

    async def _execute(
        self, job: Job, node: Node, uid: int | None, slot: int, device: str | None, public: Path | None
    ) -> tuple[Outcome, list[str]]:
        sandbox = Sandbox(self.cfg, self.root, self.python, self.jailed, self.reader)
        spec = launch_spec(sandbox, job, node, Placement(uid, slot, device, public))
        t0 = time.monotonic()
        proc = await start_launcher(
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=(node.result.fileno(),) if node.result is not None else (),
        )
        run = Run(proc, keep_bytes=max(64 * 1024, 8 * self.cfg.tail_bytes), cg=node.cg)
        self.running[job.node_id] = run
        proc.stdin.write(encode_spec(spec))
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        guards = [asyncio.create_task(self._watch_usage(run, node, job))]
        policy = IdlePolicy(self.cfg.gpu_guard.grace_s, self.cfg.gpu_guard.threshold_pct)
        if device is not None and self.reader is not None and self.cfg.gpu_guard.enabled:
            guards.append(
                asyncio.create_task(
                    watch(
                        self.reader,
                        device,
                        policy,
                        self.cfg.gpu_guard.poll_s,
                        lambda: run.kill(CRASHED, "GpuIdleError"),
                    )
                )
            )
        reader = asyncio.create_task(self._read_output(run))
        err_task = asyncio.create_task(proc.stderr.read())
        try:
            await asyncio.wait_for(proc.wait(), job.limits.timeout_s)
        except TimeoutError:
            run.kill(TIMEOUT, None)
        except asyncio.CancelledError:  # the service is going away: take the node with us
            run.kill(CRASHED, "ExecutorShutdown")
            raise
        finally:
            await self._reap(run, uid)
            for g in guards:
                g.cancel()
            self.running.pop(job.node_id, None)
        exec_time = time.monotonic() - t0
        await asyncio.wait([reader], timeout=5)
        setup_err = (await err_task).decode("utf-8", "replace")
        out, notes = classify(run, setup_err, _own_time(setup_err, exec_time), job, self.cfg)
        out.gpu_util = policy.mean_util if device is not None else None
        return out, notes

    async def _reap(self, run: Run, uid: int | None) -> None:
        """Make sure nothing of the node survives: the launcher's group, the jail, the cgroup, and
        (unjailed) every process of the slot's uid, which catches children that called setsid()."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.proc.wait(), 5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.proc.pid, signal.SIGKILL)
        await run.proc.wait()
        if run.cg is not None:
            await asyncio.to_thread(run.cg.kill_all)
        if not self.jailed and uid is not None:
            await asyncio.to_thread(kill_uid, uid)

    async def _read_output(self, run: Run) -> None:
        stream = run.proc.stdout
        while chunk := await stream.read(65536):
            run.total += len(chunk)
            run.buf += chunk
            if len(run.buf) > run.keep:
                del run.buf[: len(run.buf) - run.keep]
            if run.total > self.cfg.caps.output_bytes:
                run.kill(CRASHED, "OutputLimitExceeded")

    async def _watch_usage(self, run: Run, node: Node, job: Job) -> None:
        """Polling, only where the kernel does not enforce: the unjailed workspace's size (jailed,
        the node's file system is the limit) and resident memory without a memory cgroup."""
        disk_cap = job.limits.ephemeral_gib * GIB * 1.02 + 2**20  # block slack: one full file is FSIZE's case
        mem_cap = job.limits.mem_gib * GIB
        if self.jailed and run.cg is not None:
            return
        while True:
            await asyncio.sleep(self.cfg.local.disk_poll_s)
            if node.ws is not None and await asyncio.to_thread(wsmod.size_bytes, node.ws.path) > disk_cap:
                run.kill(CRASHED, "DiskQuotaExceeded")
                return
            if run.cg is None and await asyncio.to_thread(tree_rss, run.proc.pid) > mem_cap:
                run.kill(CRASHED, "MemoryError")
                return

    async def close(self) -> None:
        """Kill every running node (their messages are nak'ed and run again elsewhere)."""
        for run in list(self.running.values()):
            run.kill(CRASHED, "ExecutorShutdown")
        for _ in range(100):
            if not self.running:
                break
            await asyncio.sleep(0.1)
        await self.images.close()
        if self.cgroups is not None:
            self.cgroups.close()


def _own_time(launcher_err: str, measured: float, held_s: float = 1.0) -> float:
    """The node's wall time. The executor's clock (`measured`) also counts the launcher's start-up
    and the reaping, tens of milliseconds, which exec_time has always included (and a timeout or a
    guard's kill is timed by it); but when it exceeds the launcher's own measure by more than
    `held_s`, the executor itself was held (frozen past its ack wait, or its loop blocked) while
    the node ended, and the launcher's figure is the node's time."""
    for line in reversed(launcher_err.splitlines()):
        if line.startswith(ELAPSED_MARK):
            try:
                own = float(line[len(ELAPSED_MARK) :])
            except ValueError:
                break
            return own if measured - own > held_s else measured
    return measured
