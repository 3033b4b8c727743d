"""The cgroup layer's v2 layout against a cgroup2-shaped folder (the kernel's files as plain files).

The v1 layout and the kernel's enforcement are tested for real, as root, in
tests/integration/test_executor_redteam.py; a v2 host is not available here, so this checks what
the code writes where on one.

Imports a private module: `treegrpo_executor._cgroup` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo_executor._cgroup import Cgroups

pytestmark = pytest.mark.timeout(10)


def fake_v2(tmp_path: Path, controllers: str = "cpuset cpu io memory pids", subtree: str = "") -> Path:
    own = tmp_path / "kubepods" / "pod1"
    own.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.controllers").write_text(controllers + "\n")
    (own / "cgroup.subtree_control").write_text(subtree)
    (own / "cgroup.procs").write_text("101\n102\n")
    return own


def test_v2_moves_the_executor_to_a_leaf_enables_controllers_and_sets_node_limits(tmp_path):
    own = fake_v2(tmp_path)
    cg = Cgroups.detect(str(tmp_path), own={"": "/kubepods/pod1"})
    assert cg is not None and cg.v2 and cg.kind == "cgroup v2"
    assert (own / "executor" / "cgroup.procs").read_text() == "102"  # each pid written in turn
    assert (own / "cgroup.subtree_control").read_text() == "+cpuset +memory +pids"
    node = cg.create("abc", [2, 3], 2**30, 64)
    d = own / "tg-abc"
    assert node.procs_files == [str(d / "cgroup.procs")]
    assert {
        f: (d / f).read_text()
        for f in ("cpuset.cpus", "memory.max", "memory.swap.max", "memory.oom.group", "pids.max")
    } == {
        "cpuset.cpus": "2,3",
        "memory.max": str(2**30),
        "memory.swap.max": "0",
        "memory.oom.group": "1",
        "pids.max": "64",
    }


def test_v2_reads_the_kernels_counters_of_a_node(tmp_path):
    fake_v2(tmp_path, subtree="cpuset memory pids")
    cg = Cgroups.detect(str(tmp_path), own={"": "/kubepods/pod1"})
    node = cg.create("n", [0], 2**28, 16)
    d = node.dirs[""]
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    (d / "pids.events").write_text("max 3\n")
    assert (node.oom_kills(), node.pids_max_hits()) == (1, 3)


def test_without_the_controllers_delegated_there_are_no_cgroups_and_a_warning(tmp_path, caplog):
    fake_v2(tmp_path, controllers="cpu io")
    assert Cgroups.detect(str(tmp_path), own={"": "/kubepods/pod1"}) is None
    assert "no usable cgroups" in caplog.text and "offers ['cpu', 'io']" in caplog.text
