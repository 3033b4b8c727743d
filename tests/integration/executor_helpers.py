"""Helpers shared by the executor's integration tests (not a test module)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import psutil

from treegrpo_executor import ExecutorConfig, Job, Limits, LocalBackend, Outcome, parse_declaration

# a uid range of our own: another executor on this machine (a demo, another test run) uses 61000+
UID_BASE = 62000 + (os.getpid() % 400) * 8


def make_config(tmp: Path, **over) -> ExecutorConfig:
    local = {
        "workspace_root": str(tmp / "ws"),
        "hidden_paths": [],
        "disk_poll_s": 0.2,
        "sandbox_uid_base": UID_BASE,
        **over.pop("local", {}),
    }
    caps = {
        "cpu": 1,
        "mem_gib": 1,
        "nproc": 64,
        "output_bytes": 2 * 2**20,
        "ephemeral_gib": 0.05,
        **over.pop("caps", {}),
    }
    return ExecutorConfig(
        timeout_s=over.pop("timeout_s", 20),
        max_concurrency=over.pop("max_concurrency", 2),
        public_data_roots=over.pop("public_data_roots", [str(tmp / "public")]),
        local=local,
        caps=caps,
        **over,
    )


async def started(cfg: ExecutorConfig) -> LocalBackend:
    backend = LocalBackend(cfg)
    await backend.start()
    return backend


async def run_code(
    backend: LocalBackend, code: str, node: str = "n1", task: str = "t", run: str = "r1"
) -> Outcome:
    decl = parse_declaration(code, backend.cfg.gate)
    return await backend.run(Job(run, node, task, code, Limits.for_node(decl, backend.cfg)))


def sandbox_processes(n_slots: int = 8) -> list[psutil.Process]:
    uids = set(range(UID_BASE, UID_BASE + n_slots))
    found = []
    for p in psutil.process_iter(["uids"]):
        if p.info["uids"] and p.info["uids"].real in uids:
            found.append(p)
    return found


async def assert_healthy(backend: LocalBackend) -> None:
    """Nothing of a finished node survives, no workspace is left, and a normal node still runs."""
    left = sandbox_processes()
    for _ in range(20):  # a pid namespace is torn down by the kernel a moment after its init exits
        if not left:
            break
        time.sleep(0.1)
        left = sandbox_processes()
    assert left == [], f"a sandboxed process outlived its node: {[_describe(p) for p in left]}"
    assert backend.running == {}
    await backend.images.settle()  # used images are unlinked in the background
    spares = {p for imgs in backend.images.spares.values() for p in imgs}  # made ahead, never mounted
    assert [p for p in Path(backend.cfg.local.workspace_root).iterdir() if p not in spares] == []
    out = await run_code(backend, "open('submission/submission.csv','w').write('id\\n1\\n')\n", node="health")
    assert out.status == "ok" and out.submission == b"id\n1\n"


def _describe(p: psutil.Process) -> str:
    try:
        return f"pid={p.pid} ppid={p.ppid()} uid={p.uids().real} status={p.status()} cmd={p.cmdline()[:4]}"
    except psutil.Error as exc:
        return f"pid={p.pid} gone ({type(exc).__name__})"


def world_readable_dir() -> Path:
    """A folder every uid can traverse (pytest's tmp_path is under a 0700 folder), so a test that
    hides a file there proves the jail's mask and not just the folder's permissions."""
    path = Path(tempfile.mkdtemp(prefix="tg-exec-test-", dir="/tmp"))
    os.chmod(path, 0o755)
    return path
