"""The launcher's spec for a node: its environment, rlimits and the GPUs it cannot open (no jail
is started: the spec is a plain dict).

Imports a private module: `treegrpo_executor._spec` (the spec builder is the local backend's part).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo_executor import ExecutorConfig, Job, Limits
from treegrpo_executor._spec import PASS_ENV, Placement, Sandbox, launch_spec, other_gpus, rlimits

pytestmark = pytest.mark.timeout(10)


class _Ws:
    path = Path("/srv/ws/node")


class _Node:
    ws, cg, image, result = _Ws(), None, None, None


def job(**limits) -> Job:
    base = dict(cpu=1, mem_gib=1.0, ephemeral_gib=1.0, gpu=0, timeout_s=60, nproc=64, nofile=256)
    lim = Limits(**{**base, **limits, "output_bytes": 2**20})
    return Job(run_id="r", node_id="n", task="t", code="print(1)", limits=lim)


def test_a_cpu_node_gets_an_address_space_limit_and_a_gpu_node_none():
    assert rlimits(job(mem_gib=2.0))["AS"] == 2 * 2**30
    assert "AS" not in rlimits(job(gpu=1))
    assert rlimits(job(timeout_s=10, cpu=2))["CPU"] == 21


def test_an_unjailed_node_runs_in_its_workspace_with_only_the_passed_host_variables(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "x")
    monkeypatch.setenv(PASS_ENV[0], "/opt/lib")
    sb = Sandbox(ExecutorConfig(), Path("/srv/ws"), "/usr/bin/python3", jailed=False)
    spec = launch_spec(sb, job(cpu=2), _Node(), Placement(uid=None, slot=0, device=None, public=None))
    env = spec["env"]
    assert spec["cwd"] == "/srv/ws/node" and env["HOME"] == "/srv/ws/node"
    assert "SECRET_TOKEN" not in env and env[PASS_ENV[0]] == "/opt/lib"
    assert env["OMP_NUM_THREADS"] == "2" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert "/srv/ws" in spec["hide"] and "disk" not in spec  # no jail: no file system of its own


def test_every_gpu_but_the_nodes_own_is_masked(monkeypatch):
    monkeypatch.setattr("glob.glob", lambda _p: ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"])
    assert other_gpus(None, "1") == ["/dev/nvidia0", "/dev/nvidia2"]
    assert other_gpus(None, None) == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"]
