"""One workspace per node: `script.py`, `submission/`, `tmp/`, and `input/` (the task's public data).

Layout and ownership, when the executor runs as root:
  <workspace_root>/             root, 0711: a sandboxed script cannot list its neighbours
    <run>.<node>/               uid of the node's slot, 0700: nor enter them
      script.py  submission/  tmp/
      input/                    jailed: an empty mount point the launcher bind-mounts read-only;
                                unjailed: a symlink to the public folder (root-owned, so read-only)
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

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


def prepare(root: Path, name: str, code: str, uid: int | None, jailed: bool, public: Path | None) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chmod(root, 0o711)
    ws = root / name
    if ws.exists():  # a redelivered node: start clean
        remove(Workspace(ws, uid, uid))
    try:
        ws.mkdir(mode=0o700)
        for sub in ("submission", "tmp"):
            (ws / sub).mkdir()
        (ws / "script.py").write_text(code, encoding="utf-8", errors="surrogateescape")
        if jailed or public is None:
            (ws / "input").mkdir()
        else:
            (ws / "input").symlink_to(public, target_is_directory=True)
        if uid is not None:
            for p in (ws, ws / "submission", ws / "tmp", ws / "script.py"):
                os.chown(p, uid, uid)
    except OSError as exc:
        raise WorkspaceError(f"cannot prepare workspace {ws}: {exc}") from exc
    return Workspace(ws, uid, uid)


def read_submission(ws: Workspace) -> bytes | None:
    """The submission bytes, refusing symlinks and non-regular files (the script is untrusted and
    we read as root: a symlink to /etc/shadow must not become a 'submission')."""
    try:
        fd = os.open(ws.submission, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
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
    """Bytes used under a workspace (not following links, not entering input/)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        if dirpath == str(path) and "input" in dirnames:
            dirnames.remove("input")
        for fn in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, fn)).st_blocks * 512
            except OSError:
                continue
    return total


def remove(ws: Workspace) -> None:
    def _unlock(func, p, _exc):  # a script may chmod 000 its own folders; root can still fix that
        os.chmod(p, 0o700)
        func(p)

    if ws.path.is_symlink():
        ws.path.unlink()
        return
    shutil.rmtree(ws.path, onerror=_unlock)
