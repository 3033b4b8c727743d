"""The launcher's spec for one node: the plain dict `_launch.py` reads on stdin.

Everything the jail and the launcher enforce for a node is decided here, from the job's limits and
the host's facts (jailed or not, the slot's uid and CPUs, the node's GPU): its environment, its
rlimits, what it sees of the host file system, its private tmpfs mounts, its disk. Kept apart from
the local backend, which only runs the launcher and watches the node, so what a node is allowed is
read in one place.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from pathlib import Path

from treegrpo_executor import _workspace as wsmod
from treegrpo_executor._gpu import GpuReader
from treegrpo_executor._host import cpu_set, host_unix_sockets, interpreter_trees
from treegrpo_executor._node import Node, disk_bytes, inodes
from treegrpo_executor._outcome import GIB, Job
from treegrpo_executor.config import ExecutorConfig

# host variables a node needs to reach its GPU the way the host does (NCCL/NVSHMEM multicast off)
PASS_ENV = (
    "LD_LIBRARY_PATH",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


@dataclass(frozen=True)
class Sandbox:
    """The facts of this machine's sandbox every node's spec depends on."""

    cfg: ExecutorConfig
    root: Path  # the workspaces' root: hidden from every node
    python: str  # the interpreter a node's script runs under
    jailed: bool  # namespaces available: the node gets a file system of its own
    reader: GpuReader | None = None  # maps a GPU to its /dev/nvidiaN minor


@dataclass(frozen=True)
class Placement:
    """Where one node runs: its slot's uid (None unprivileged), CPUs, GPU and public data."""

    uid: int | None
    slot: int
    device: str | None
    public: Path | None


def node_env(sb: Sandbox, job: Job, node: Node, device: str | None) -> dict[str, str]:
    """The node's whole environment: nothing of the executor's own leaks but PASS_ENV."""
    threads = str(max(1, int(job.limits.cpu)))
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "CUDA_VISIBLE_DEVICES": device if device is not None else "",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    env.update({k: os.environ[k] for k in PASS_ENV if k in os.environ})
    cwd = node_cwd(sb, node)
    env.update(HOME=cwd, TMPDIR=os.path.join(cwd, "tmp"))
    return env


def node_cwd(sb: Sandbox, node: Node) -> str:
    return os.path.join(sb.cfg.local.jail_dir, "work") if sb.jailed else str(node.ws.path)


def rlimits(job: Job) -> dict[str, int]:
    lim = job.limits
    rl = {
        "NPROC": lim.nproc,
        "FSIZE": int(lim.ephemeral_gib * GIB),
        "NOFILE": lim.nofile,
        "CORE": 0,
        "CPU": int(math.ceil(lim.timeout_s * lim.cpu)) + 1,
    }
    if not lim.gpu:  # a CUDA context maps far more address space than it uses
        rl["AS"] = int(lim.mem_gib * GIB)
    return rl


def launch_spec(sb: Sandbox, job: Job, node: Node, at: Placement) -> dict:
    """The spec `_launch.py` reads for this node."""
    lim = job.limits
    keep = interpreter_trees(sb.python)
    hide = wsmod.hidden_dirs(sb.cfg.local.hidden_paths, sb.cfg.public_data_roots, keep) + [str(sb.root)]
    spec = {
        "namespaces": sb.jailed,
        "cwd": node_cwd(sb, node),
        "jail_dir": sb.cfg.local.jail_dir,
        "uid": at.uid,
        "gid": at.uid,
        "rlimits": rlimits(job),
        "cpus": cpu_set(at.slot, lim.cpu),
        "hide": hide,
        "mask_devices": other_gpus(sb.reader, at.device),
        "private_tmp": [
            ("/tmp", "512m"),
            ("/var/tmp", "512m"),
            ("/run", "64m"),
            ("/var/run", "64m"),
            ("/var/lock", "16m"),
            ("/dev/shm", f"{max(64, int(lim.mem_gib * 512))}m"),
        ],
        "expose": keep,
        "input_src": str(at.public) if at.public else None,
        "argv": [sb.python, "-I", "-u", "script.py"],
        "env": node_env(sb, job, node, at.device),
        "cgroup_procs": node.cg.procs_files if node.cg else [],
    }
    if sb.jailed:
        spec.update(jail_spec(sb, job, node))
    return spec


def jail_spec(sb: Sandbox, job: Job, node: Node) -> dict:
    """What only a jailed node has: its own disk, the code written into it, the masked sockets."""
    disk = {
        "kind": "tmpfs",
        "bytes": disk_bytes(job.limits),
        "inodes": inodes(job.limits, sb.cfg.local.inodes_per_gib),
    }
    if node.image is not None:
        disk = {"kind": "loop", "image": str(node.image)}
    return {
        "disk": disk,
        "code": job.code.encode("utf-8", "surrogateescape"),
        "mask_sockets": host_unix_sockets(),
        "result_fd": node.result.fileno(),
        "submission_cap": wsmod.MAX_SUBMISSION,
    }


def other_gpus(reader: GpuReader | None, device: str | None) -> list[str]:
    """Device files of every GPU but the node's (all of them for a CPU node), so overriding
    CUDA_VISIBLE_DEVICES reaches nothing: the file is /dev/null in the jail."""
    mine = _minor(reader, device) if device is not None else None
    return sorted(p for p in glob.glob("/dev/nvidia[0-9]*") if p != f"/dev/nvidia{mine}")


def _minor(reader: GpuReader | None, device: str) -> int:
    minor = getattr(reader, "minor", None)
    return minor(device) if callable(minor) else int(device)
