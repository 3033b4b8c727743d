"""One cgroup per node: memory (shmem, memfd and tmpfs pages included), a cpuset, a pids limit.

The kernel enforces these whatever the script does: `sched_setaffinity` cannot leave the cpuset,
`memfd_create` + `fallocate` is charged to the node's memory, and a fork bomb stops at `pids.max`.
Two layouts are handled:
- cgroup v2 (Kubernetes nodes, systemd hosts): one unified tree. The executor's own cgroup may
  hold processes, and v2 forbids controllers on a group with processes, so the executor moves
  itself into a leaf `<own>/executor` first, then makes node groups `<own>/tg-<token>`.
- cgroup v1 (this machine and CI): a mount per controller under /sys/fs/cgroup; node groups are
  `<mount>/<own path>/treegrpo-<pid>/<token>` in each of memory, cpuset and pids.
Neither usable: `detect` returns None and the caller logs which guarantees are lost.
The launcher joins the node's groups itself (it writes its pid to each `cgroup.procs` before it
forks), so every process of the node is inside from its first instruction.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
V1_CONTROLLERS = ("memory", "cpuset", "pids")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _own_paths() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    own = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in ctrls.split(",") if ctrls else [""]:
            own[c] = path
    return own


def _sweep(parent: Path, mine: str) -> None:
    """Remove the groups an executor that died left behind (a busy one stays: rmdir refuses)."""
    for old in parent.glob("treegrpo-*"):
        pid = old.name.removeprefix("treegrpo-")
        if old.name == mine or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue  # ours, or a live executor's
        for child in [p for p in old.iterdir() if p.is_dir()]:
            with contextlib.suppress(OSError):
                os.rmdir(child)
        with contextlib.suppress(OSError):
            os.rmdir(old)


@dataclass
class NodeCgroup:
    """The groups of one node (one per v1 controller, or one v2 group)."""

    dirs: dict[str, Path]  # controller ('' for v2) -> group folder
    v2: bool
    mem_bytes: int = 0

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def _dir(self, ctrl: str) -> Path:
        return self.dirs["" if self.v2 else ctrl]

    def oom_kills(self) -> int:
        if self.v2:
            return _counter(_read(self._dir("memory") / "memory.events"), "oom_kill")
        return _counter(_read(self._dir("memory") / "memory.oom_control"), "oom_kill")

    def pids_max_hits(self) -> int:
        return _counter(_read(self._dir("pids") / "pids.events"), "max")

    def memory_peak(self) -> int:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        text = _read(self._dir("memory") / name).strip()
        return int(text) if text.isdigit() else 0

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the groups (the pid namespace's end normally did that)."""
        if self.v2:
            with contextlib.suppress(OSError):
                _write(self.dirs[""] / "cgroup.kill", "1")
            return
        for d in self.dirs.values():
            for pid in _read(d / "cgroup.procs").split():
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)

    def remove(self, wait_s: float = 2.0) -> bool:
        """rmdir every group; a group is busy until its last process is reaped. Never raises."""
        deadline = time.monotonic() + wait_s
        left = list(self.dirs.values())
        while left:
            self.kill_all()
            for d in list(left):
                try:
                    os.rmdir(d)
                    left.remove(d)
                except FileNotFoundError:
                    left.remove(d)
                except OSError:
                    pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if left:
            log.warning("cgroups %s still busy; left in place", [str(d) for d in left])
        return not left


class Cgroups:
    """Makes node groups under this executor's own cgroup."""

    def __init__(self, parents: dict[str, Path], v2: bool):
        self.parents = parents
        self.v2 = v2

    @property
    def kind(self) -> str:
        return "cgroup v2" if self.v2 else "cgroup v1 (" + ", ".join(self.parents) + ")"

    @classmethod
    def detect(cls, root: str = "/sys/fs/cgroup", own: dict[str, str] | None = None) -> Cgroups | None:
        """v2 if its controllers can be had, else v1; None (logged) when neither works.
        `own`: this process's cgroup paths (default: /proc/self/cgroup)."""
        errors = []
        own = _own_paths() if own is None else own
        for attempt in (cls._v2, cls._v1):
            try:
                return attempt(Path(root), own)
            except (OSError, ValueError, KeyError) as exc:
                errors.append(f"{attempt.__name__.strip('_')}: {exc}")
        log.warning("no usable cgroups under %s (%s)", root, "; ".join(errors))
        return None

    @classmethod
    def _v2(cls, root: Path, own_paths: dict[str, str]) -> Cgroups:
        mount = root if (root / "cgroup.controllers").exists() else root / "unified"
        own = mount / own_paths[""].lstrip("/")
        need = {"memory", "cpuset", "pids"}
        if not need <= set(_read(own / "cgroup.controllers").split()):
            raise ValueError(f"{own} offers {_read(own / 'cgroup.controllers').split() or 'no'} controllers")
        enabled = set(_read(own / "cgroup.subtree_control").split())
        if not need <= enabled:
            leaf = own / "executor"  # "no internal processes": our own pids go to a leaf first
            leaf.mkdir(exist_ok=True)
            for pid in _read(own / "cgroup.procs").split():
                with contextlib.suppress(OSError):
                    _write(leaf / "cgroup.procs", pid)
            _write(own / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(need - enabled)))
        return cls({"": own}, v2=True)

    @classmethod
    def _v1(cls, root: Path, own: dict[str, str]) -> Cgroups:
        parents = {}
        for c in V1_CONTROLLERS:
            base = root / c / own[c].lstrip("/") / f"treegrpo-{os.getpid()}"
            _sweep(base.parent, base.name)
            base.mkdir(exist_ok=True)
            if c == "cpuset":  # v1 cpusets start empty: a child can only take from its parent
                for f in ("cpuset.cpus", "cpuset.mems"):
                    _write(base / f, _read(base.parent / f).strip())
            parents[c] = base
        cls(parents, v2=False).create(f"probe-{os.urandom(4).hex()}", [0], 2**26, 16).remove()
        return cls(parents, v2=False)

    def create(self, token: str, cpus: list[int], mem_bytes: int, pids: int) -> NodeCgroup:
        """The node's groups with their limits set; OSError if the kernel refuses one."""
        name = f"tg-{token}" if self.v2 else token
        parents = dict(self.parents)
        if not self.v2 and set(cpus) >= os.sched_getaffinity(0):
            del parents["cpuset"]  # every core already: a v1 cpuset attach costs ~10 ms for nothing
        node = NodeCgroup({c: p / name for c, p in parents.items()}, self.v2, mem_bytes)
        try:
            for d in node.dirs.values():
                d.mkdir()
            cpu_list = ",".join(map(str, cpus))
            if self.v2:
                d = node.dirs[""]
                _write(d / "cpuset.cpus", cpu_list)
                _write(d / "memory.max", str(mem_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(d / "memory.swap.max", "0")
                with contextlib.suppress(OSError):
                    _write(d / "memory.oom.group", "1")
                _write(d / "pids.max", str(pids))
            else:
                mem, cs = node.dirs["memory"], node.dirs.get("cpuset")
                _write(mem / "memory.limit_in_bytes", str(mem_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():  # memory + swap: no escape to swap
                    _write(mem / "memory.memsw.limit_in_bytes", str(mem_bytes))
                if cs is not None:
                    _write(cs / "cpuset.cpus", cpu_list)
                    _write(cs / "cpuset.mems", _read(self.parents["cpuset"] / "cpuset.mems").strip())
                _write(node.dirs["pids"] / "pids.max", str(pids))
        except OSError:
            node.remove(wait_s=0)
            raise
        return node

    def close(self) -> None:
        """Remove our v1 parent groups (v2: node groups are already gone; the leaf keeps us)."""
        if not self.v2:
            for p in self.parents.values():
                with contextlib.suppress(OSError):
                    os.rmdir(p)
