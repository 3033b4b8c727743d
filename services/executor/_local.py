"""Local sandbox backend: each node runs as a jailed, unprivileged process tree on this machine.

What is enforced where (docs/EXECUTOR.md has the full table):
- launcher (`_launch.py`): namespaces (pid/mount/net/ipc/uts), hidden folders, read-only input,
  the slot's uid/gid, rlimits (AS for CPU nodes, NPROC, FSIZE, CPU, NOFILE, CORE), CPU affinity;
- this module: the wall-clock timeout, the output cap, the workspace-disk cap, a resident-memory
  watch (GPU nodes have no RLIMIT_AS: CUDA reserves huge address space), the GPU-idle guard, and
  the final kill of everything the node started.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import math
import os
import signal
import socket
import sys
import time
from pathlib import Path

from services.executor import _workspace as wsmod
from services.executor._gpu import GpuPool, GpuReader, IdlePolicy, watch
from services.executor._host import (
    SandboxError,
    cpu_set,
    interpreter_trees,
    kill_uid,
    require_traversable,
    tree_rss,
)
from services.executor._launch import ELAPSED_MARK, encode_spec
from services.executor._outcome import (
    CRASHED,
    GIB,
    NO_SUBMISSION,
    OK,
    TIMEOUT,
    Job,
    Outcome,
    Timings,
    exc_type_from_output,
    signal_name,
    tail,
)
from services.executor.config import ExecutorConfig

log = logging.getLogger(__name__)
LAUNCHER = str(Path(__file__).with_name("_launch.py"))
SETUP_FAILED = 125
_PASS_ENV = ("LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


class _Run:
    """Book-keeping of one running node: its process, its output, why it was killed."""

    def __init__(self, proc: asyncio.subprocess.Process, keep_bytes: int):
        self.proc = proc
        self.buf = bytearray()
        self.keep = keep_bytes
        self.total = 0
        self.killed_for: tuple[str, str | None] | None = None  # (status, exc_type)

    def kill(self, status: str, exc_type: str | None) -> None:
        if self.killed_for is None:
            self.killed_for = (status, exc_type)
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)  # the launcher SIGKILLs the jail's init


class LocalBackend:
    name = "local"

    def __init__(self, cfg: ExecutorConfig, reader: GpuReader | None = None):
        self.cfg = cfg
        self.root = Path(cfg.local.workspace_root)
        self.is_root = os.geteuid() == 0
        self.jailed = False
        self.slots: asyncio.Queue[int] = asyncio.Queue()
        for k in range(cfg.max_concurrency):
            self.slots.put_nowait(k)
        self.gpus = GpuPool(cfg.local.gpu_devices)
        self.reader = reader
        self.running: dict[str, _Run] = {}
        self.host = socket.gethostname()
        self.python = cfg.local.python or sys.executable

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.is_root:
            os.chmod(self.root, 0o711)
        self.jailed = self.is_root and self.cfg.local.namespaces and await self._probe_namespaces()
        if self.is_root and not self.jailed:
            require_traversable(self.root)
        log.info("local sandbox: root=%s jailed=%s uid-drop=%s", self.root, self.jailed, self.is_root)

    async def _probe_namespaces(self) -> bool:
        spec = {"namespaces": True, "workspace": str(self.root), "jail_dir": self.cfg.local.jail_dir,
                "cwd": "/", "argv": ["/bin/true"], "env": {}, "hide": [], "input_src": None}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-I", "-S", LAUNCHER, encode_spec(spec),
                                                    stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        if proc.returncode != 0:
            log.warning("namespaces unavailable (%s); sandbox runs without them", err.decode().strip())
        return proc.returncode == 0

    async def run(self, job: Job) -> Outcome:
        t0 = time.monotonic()
        slot = await self.slots.get()
        device = None
        try:
            if job.limits.gpu:
                device = await self.gpus.acquire()
            t_pending = time.monotonic() - t0
            uid = self.cfg.local.sandbox_uid_base + slot if self.is_root else None
            public = wsmod.public_dir(self.cfg.public_data_roots, job.task)
            # the pid too: another executor on this host running a redelivered node gets its own folder
            ws = wsmod.prepare(self.root, f"{job.run_id}.{job.node_id}.{os.getpid()}", job.code, uid, self.jailed,
                               public)
            t_stage = time.monotonic() - t0 - t_pending
            out = await self._execute_and_collect(job, ws, slot, device, public)
            out.timings.pending, out.timings.stage = t_pending, t_stage
            out.where = f"local:{self.host}/slot{slot}"
            return out
        finally:
            self.gpus.release(device)
            self.slots.put_nowait(slot)

    async def _execute_and_collect(self, job: Job, ws: wsmod.Workspace, slot: int, device: str | None,
                                   public: Path | None) -> Outcome:
        try:
            out = await self._execute(job, ws, slot, device, public)
            t_ret = time.monotonic()
            if out.status == OK:
                out.submission = wsmod.read_submission(ws)
                if out.submission is None:
                    out.status = NO_SUBMISSION
        finally:
            if not self.cfg.local.keep_workspaces:
                await asyncio.to_thread(wsmod.remove, ws)
        out.timings = Timings(exec=out.exec_time, retrieve=time.monotonic() - t_ret)
        return out

    def _spec(self, job: Job, ws: wsmod.Workspace, slot: int, device: str | None, public: Path | None) -> dict:
        lim = job.limits
        threads = str(max(1, int(lim.cpu)))
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": threads,
               "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
               "CUDA_VISIBLE_DEVICES": device if device is not None else "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        env.update({k: os.environ[k] for k in _PASS_ENV if k in os.environ})
        cwd = os.path.join(self.cfg.local.jail_dir, "work") if self.jailed else str(ws.path)
        env.update(HOME=cwd, TMPDIR=os.path.join(cwd, "tmp"))
        rl = {"NPROC": lim.nproc, "FSIZE": int(lim.ephemeral_gib * GIB), "NOFILE": lim.nofile, "CORE": 0,
              "CPU": int(math.ceil(lim.timeout_s * lim.cpu)) + 1}
        if not lim.gpu:
            rl["AS"] = int(lim.mem_gib * GIB)
        keep = interpreter_trees(self.python)
        hide = wsmod.hidden_dirs(self.cfg.local.hidden_paths, self.cfg.public_data_roots, keep) + [str(self.root)]
        return {"namespaces": self.jailed, "workspace": str(ws.path), "cwd": cwd,
                "jail_dir": self.cfg.local.jail_dir, "uid": ws.uid, "gid": ws.gid, "rlimits": rl,
                "cpus": cpu_set(slot, lim.cpu), "hide": hide, "mask_devices": self._other_gpus(device),
                "private_tmp": [("/tmp", "512m"), ("/var/tmp", "512m"), ("/dev/shm", f"{max(64, int(lim.mem_gib * 1024))}m")], "expose": keep, "input_src": str(public) if public else None,
                "argv": [self.python, "-I", "-u", "script.py"], "env": env}

    def _other_gpus(self, device: str | None) -> list[str]:
        """Device files of every GPU but the node's (all of them for a CPU node), so overriding
        CUDA_VISIBLE_DEVICES reaches nothing: the file is /dev/null in the jail."""
        mine = self._minor(device) if device is not None else None
        return sorted(p for p in glob.glob("/dev/nvidia[0-9]*") if p != f"/dev/nvidia{mine}")

    def _minor(self, device: str) -> int:
        minor = getattr(self.reader, "minor", None)
        return minor(device) if callable(minor) else int(device)

    async def _execute(self, job: Job, ws: wsmod.Workspace, slot: int, device: str | None,
                       public: Path | None) -> Outcome:
        spec = self._spec(job, ws, slot, device, public)
        t0 = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", LAUNCHER, encode_spec(spec), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        run = _Run(proc, keep_bytes=max(64 * 1024, 8 * self.cfg.tail_bytes))
        self.running[job.node_id] = run
        guards = [asyncio.create_task(self._watch_usage(run, ws, job))]
        policy = IdlePolicy(self.cfg.gpu_guard.grace_s, self.cfg.gpu_guard.threshold_pct)
        if device is not None and self.reader is not None and self.cfg.gpu_guard.enabled:
            guards.append(asyncio.create_task(watch(self.reader, device, policy, self.cfg.gpu_guard.poll_s,
                                                    lambda: run.kill(CRASHED, "GpuIdleError"))))
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
            await self._reap(run, ws)
            for g in guards:
                g.cancel()
            self.running.pop(job.node_id, None)
        exec_time = time.monotonic() - t0
        await asyncio.wait([reader], timeout=5)
        setup_err = (await err_task).decode("utf-8", "replace")
        out = self._classify(run, setup_err, _own_time(setup_err, exec_time))
        out.gpu_util = policy.mean_util if device is not None else None
        return out

    async def _reap(self, run: _Run, ws: wsmod.Workspace) -> None:
        """Make sure nothing of the node survives: the launcher's group, the jail, and (unjailed)
        every process of the slot's uid, which catches children that called setsid()."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.proc.wait(), 5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run.proc.pid, signal.SIGKILL)
        await run.proc.wait()
        if not self.jailed and ws.uid is not None:
            await asyncio.to_thread(kill_uid, ws.uid)

    async def _read_output(self, run: _Run) -> None:
        stream = run.proc.stdout
        while chunk := await stream.read(65536):
            run.total += len(chunk)
            run.buf += chunk
            if len(run.buf) > run.keep:
                del run.buf[:len(run.buf) - run.keep]
            if run.total > self.cfg.caps.output_bytes:
                run.kill(CRASHED, "OutputLimitExceeded")

    async def _watch_usage(self, run: _Run, ws: wsmod.Workspace, job: Job) -> None:
        """Workspace disk (all files together; RLIMIT_FSIZE only bounds each file) and resident memory."""
        disk_cap = job.limits.ephemeral_gib * GIB * 1.02 + 2**20  # block slack: one full file is FSIZE's case
        mem_cap = job.limits.mem_gib * GIB
        while True:
            await asyncio.sleep(self.cfg.local.disk_poll_s)
            used = await asyncio.to_thread(wsmod.size_bytes, ws.path)
            if used > disk_cap:
                run.kill(CRASHED, "DiskQuotaExceeded")
                return
            if await asyncio.to_thread(tree_rss, run.proc.pid) > mem_cap:
                run.kill(CRASHED, "MemoryError")
                return

    def _classify(self, run: _Run, setup_err: str, exec_time: float) -> Outcome:
        text = run.buf.decode("utf-8", "replace")
        term = tail(text, self.cfg.tail_lines, self.cfg.tail_bytes)
        rc = run.proc.returncode
        if run.killed_for == (CRASHED, "ExecutorShutdown"):
            raise SandboxError("executor shut down while the node ran; it will run again")
        if run.killed_for is not None:
            status, exc = run.killed_for
            return Outcome(status=status, exc_type=exc, exec_time=exec_time, term_tail=term)
        if rc == SETUP_FAILED and "treegrpo sandbox setup failed" in setup_err:
            raise SandboxError(setup_err.strip()[-500:])
        if rc == 128 + signal.SIGXCPU:
            return Outcome(status=TIMEOUT, exec_time=exec_time, term_tail=term)
        if rc != 0:
            exc = exc_type_from_output(text) or signal_name(rc) or "SystemExit"
            return Outcome(status=CRASHED, exc_type=exc, exec_time=exec_time, term_tail=term)
        return Outcome(status=OK, exec_time=exec_time, term_tail=term)

    async def close(self) -> None:
        """Kill every running node (their messages are nak'ed and run again elsewhere)."""
        for run in list(self.running.values()):
            run.kill(CRASHED, "ExecutorShutdown")
        for _ in range(100):
            if not self.running:
                break
            await asyncio.sleep(0.1)


def _own_time(launcher_err: str, measured: float, held_s: float = 1.0) -> float:
    """The node's wall time. The executor's clock (`measured`) also counts the launcher's start-up
    and the reaping, tens of milliseconds, which exec_time has always included (and a timeout or a
    guard's kill is timed by it); but when it exceeds the launcher's own measure by more than
    `held_s`, the executor itself was held (frozen past its ack wait, or its loop blocked) while
    the node ended, and the launcher's figure is the node's time."""
    for line in reversed(launcher_err.splitlines()):
        if line.startswith(ELAPSED_MARK):
            try:
                own = float(line[len(ELAPSED_MARK):])
            except ValueError:
                break
            return own if measured - own > held_s else measured
    return measured
