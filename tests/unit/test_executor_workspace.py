"""Workspace helpers of the unjailed path: the submission walk, the size walk, removal.

Imports a private module: `treegrpo_executor._workspace` (what these tests exercise is not on the
package's public surface).
"""

from __future__ import annotations

import os

import pytest

from treegrpo_executor import _workspace as wsmod

pytestmark = pytest.mark.timeout(60)


def deep_tree(top, depth: int = 1500) -> None:
    """`depth` folders of 200-byte names (a path of ~300 KB), a file at the bottom, all locked."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    fds = [fd]
    for i in range(depth):
        name = f"d{i}".ljust(200, "x")
        os.mkdir(name, dir_fd=fd)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        fds.append(fd)
    with open(os.open("data", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as fh:
        fh.write(b"x" * 8192)
    for fd in fds[1:]:
        os.fchmod(fd, 0)
    for fd in fds:
        os.close(fd)


def test_a_deep_long_named_locked_tree_is_measured_and_removed_without_raising(tmp_path):
    ws = wsmod.prepare(tmp_path / "root", "pass\n", None, None)
    deep_tree(ws.path)
    os.chmod(ws.path / "tmp", 0)
    assert wsmod.size_bytes(ws.path) >= 8192
    wsmod.remove(ws.path)
    assert not ws.path.exists()


def test_workspace_names_are_random_not_derived_from_the_node(tmp_path):
    a = wsmod.prepare(tmp_path, "pass\n", None, None)
    b = wsmod.prepare(tmp_path, "pass\n", None, None)
    assert a.path != b.path and len(a.path.name) == 32


@pytest.mark.parametrize("attack", ["folder", "file", "fifo", "dir"])
def test_the_submission_walk_follows_no_link_and_takes_only_a_regular_file(tmp_path, attack):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "submission.csv").write_text("not the node's")
    ws = wsmod.prepare(tmp_path / "root", "pass\n", None, None)
    sub = ws.path / "submission"
    if attack == "folder":
        sub.rmdir()
        sub.symlink_to(elsewhere)
    elif attack == "file":
        (sub / "submission.csv").symlink_to(elsewhere / "submission.csv")
    elif attack == "fifo":
        os.mkfifo(sub / "submission.csv")
    else:
        (sub / "submission.csv").mkdir()
    fd = os.open(ws.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert wsmod.read_submission(fd) is None
    finally:
        os.close(fd)


def test_the_submission_walk_reads_a_plain_file(tmp_path):
    ws = wsmod.prepare(tmp_path / "root", "pass\n", None, None)
    (ws.path / "submission" / "submission.csv").write_text("id\n1\n")
    fd = os.open(ws.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert wsmod.read_submission(fd) == b"id\n1\n"
    finally:
        os.close(fd)
