"""Workspaces: the node's own file system (jailed) or a host folder (no namespaces, e.g. not root).

Jailed (root + namespaces, this machine, CI): nothing of the node lives in a host folder. Its
workspace is a file system made for it and mounted only inside its mount namespace
(`_jail.build`): an ext4 image under <workspace_root> loop-mounted (`disk = "loop"`) or a tmpfs
(`disk = "tmpfs"`, whose pages count against the node's memory), both with a byte and an inode
limit. Cleanup is one unlink of the image; a tree the script leaves (any depth, any name length,
any permissions) dies with the mount.

Unjailed: `<workspace_root>/<random>/` (uid of the node's slot, 0700), so nodes cannot name each
other's folders; removed by `rm -rf` (fts: no recursion limit, no path length limit).
Either way the layout the script sees is: script.py  submission/  tmp/  input/ (public data).
Names are random tokens, never derived from run or node ids.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from treegrpo_executor._jail import open_submission

log = logging.getLogger(__name__)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
MAX_SUBMISSION = 512 * 2**20


class WorkspaceError(RuntimeError):
    """The executor could not prepare a workspace (our side: disk, permissions)."""


@dataclass(frozen=True)
class Workspace:
    path: Path
    uid: int | None
    gid: int | None

    @property
    def submission(self) -> Path:
        return self.path / "submission" / "submission.csv"


def public_dir(roots: list[str], task: str) -> Path | None:
    """`<root>/<task>/prepared/public` (MLE-bench layout), else `<root>/<task>`; None if absent."""
    if not _SAFE.match(task) or ".." in task:
        return None
    for root in roots:
        for cand in (Path(root) / task / "prepared" / "public", Path(root) / task):
            if cand.is_dir():
                return cand.resolve()
    return None


def hidden_dirs(configured: list[str], roots: list[str], keep: list[str]) -> list[str]:
    """Folders masked inside the jail: the configured ones (the grader's private tree) and the whole
    of every public data root. The node's own task data is bind-mounted at ./input before the
    masks go on; the rest of a root is no business of the script's: an MLE-bench root also holds
    `prepared/private` and `raw/` (the original labelled data the private test set was cut from).
    A folder that holds something the script needs (`keep`: the interpreter) is not masked."""
    found = []
    for p in [*configured, *roots]:
        real = os.path.realpath(p)
        if os.path.isdir(real) and not any(k == real or k.startswith(real.rstrip("/") + "/") for k in keep):
            found.append(real)
    return sorted(set(found))


def token() -> str:
    return secrets.token_hex(16)


def make_image(root: Path, size: int, inodes: int) -> Path:
    """A sparse ext4 image of `size` bytes with exactly `inodes` inodes (the node's disk limits)."""
    root.mkdir(parents=True, exist_ok=True)
    img = root / f"{token()}.img"
    try:
        with open(os.open(img, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
            fh.truncate(size)
        subprocess.run(
            [
                "mkfs.ext4",
                "-q",
                "-F",
                "-N",
                str(inodes),
                "-m",
                "0",
                "-O",
                "^has_journal,^resize_inode",
                "-E",
                "lazy_itable_init=1,nodiscard",
                str(img),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        img.unlink(missing_ok=True)
        raise WorkspaceError(f"cannot make the workspace image: {exc}") from exc
    return img


def prepare(root: Path, code: str, uid: int | None, public: Path | None) -> Workspace:
    """An unjailed workspace: a host folder with a random name."""
    root.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chmod(root, 0o711)
    ws = root / token()
    try:
        ws.mkdir(mode=0o700)
        for sub in ("submission", "tmp"):
            (ws / sub).mkdir()
        (ws / "script.py").write_text(code, encoding="utf-8", errors="surrogateescape")
        if public is None:
            (ws / "input").mkdir()
        else:
            (ws / "input").symlink_to(public, target_is_directory=True)
        if uid is not None:
            for p in (ws, ws / "submission", ws / "tmp", ws / "script.py"):
                os.chown(p, uid, uid)
    except OSError as exc:
        raise WorkspaceError(f"cannot prepare workspace {ws}: {exc}") from exc
    return Workspace(ws, uid, uid)


def read_submission(root_fd: int) -> bytes | None:
    """submission/submission.csv below a workspace descriptor opened before the script started:
    O_NOFOLLOW on every component (a symlinked folder is refused like a symlinked file), regular
    files only, at most MAX_SUBMISSION bytes. We read as root; the script chose the names."""
    fd = open_submission(root_fd)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SUBMISSION:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_SUBMISSION + 1)[:MAX_SUBMISSION]
    finally:
        os.close(fd)


def size_bytes(path: Path) -> int:
    """Bytes of blocks used under an unjailed workspace: `du` (fts) reaches any depth and any path
    length, which a Python walk by path does not (ENAMETOOLONG past 4096 bytes hides the data).
    `input` is a symlink there and du follows none."""
    try:
        out = subprocess.run(
            ["du", "-s", "-x", "-B1", "--", str(path)], capture_output=True, timeout=120
        ).stdout
        return int(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


def remove(path: Path) -> None:
    """Remove a workspace folder or image whatever the script left in it; never raises."""
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
            return
        if not path.exists():
            return
        if os.geteuid() != 0:  # root ignores modes; the owner must first give itself back access
            subprocess.run(["chmod", "-R", "u+rwx", "--", str(path)], capture_output=True, timeout=600)
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not remove workspace %s: %s", path, exc)
    if os.path.lexists(path):
        log.warning("workspace %s is still there after removal", path)
