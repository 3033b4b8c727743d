"""The jail's file system and its syscall filter, built by the launcher's init (stdlib only).

Inside a fresh mount namespace, as root, before the script starts:
- the node's own file system at <jail_dir>/work: a loop-mounted ext4 image or a tmpfs, each with a
  byte and an inode limit set when it is made (the kernel answers ENOSPC; nothing walks the tree);
  it dies with the namespace, so cleanup on the host is one unlink of the image at most;
- private tmpfs over every world-writable shared place (/tmp, /var/tmp, /run and so /run/lock,
  /dev/shm) and a fresh mqueue: nothing one node leaves there is seen by another;
- /dev/null over every unix socket bound on the host (the executor lists them from /proc/net/unix);
- hidden folders masked, GPUs that are not the node's masked, public data read-only at ./input.
After the script: its submission is copied out through a descriptor opened before it started,
with O_NOFOLLOW on every component, regular files only, size-capped.
"""

import ctypes
import os
import struct

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
LOOP_CTL_GET_FREE, LOOP_CONFIGURE, LO_FLAGS_AUTOCLEAR = 0x4C82, 0x4C0A, 4
_libc = ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, target, fstype, flags, data=None) -> None:
    enc = [None if x is None else x.encode() for x in (src, target, fstype, data)]
    check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def build(spec: dict) -> int:
    """Every mount of the jail; returns a descriptor of the node's file system root."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks to the host
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    jail = spec["jail_dir"]
    mount("tmpfs", jail, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
    work = os.path.join(jail, "work")
    os.mkdir(work, 0o755)
    _mount_disk(spec["disk"], work)
    root_fd = _populate(work, spec)
    src = spec.get("input_src")
    if src:
        dst = os.path.join(work, "input")
        mount(src, dst, None, MS_BIND | MS_REC)
        mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_REC)
    for k, (path, size) in enumerate(spec.get("private_tmp", [])):
        if os.path.isdir(path) and not os.path.islink(
            path
        ):  # an interpreter living there stays (a CI clone in /tmp)
            inner = [t for t in spec.get("expose", []) if t.startswith(path.rstrip("/") + "/")]
            _cover(path, inner, jail, f"tmp{k}", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    if os.path.isdir("/dev/mqueue"):  # this ipc namespace's own queues (the host's view is stale)
        try:
            mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:  # no POSIX queues in this kernel: nothing to share either
            pass
    for dev in [*spec.get("mask_devices", []), *spec.get("mask_sockets", [])]:
        if os.path.lexists(dev) and not os.path.islink(dev) and not os.path.isdir(dev):
            mount("/dev/null", dev, None, MS_BIND)
    _expose(spec.get("expose", []), jail)
    for path in spec.get("hide", []):  # last: a hidden folder may be an ancestor of the workspace
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
    return root_fd


def probe(spec: dict) -> None:
    """What every node needs of the kernel, tried once at start: private mounts and a tmpfs."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", spec["jail_dir"], "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=64,mode=755")


def _mount_disk(disk: dict, target: str) -> None:
    flags = MS_NOSUID | MS_NODEV
    if disk["kind"] == "tmpfs":
        mount("tmpfs", target, "tmpfs", flags, f"size={disk['bytes']},nr_inodes={disk['inodes']},mode=700")
        return
    import fcntl  # loop only: a C module, no start-up cost worth avoiding

    img = os.open(disk["image"], os.O_RDWR | os.O_CLOEXEC)
    ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(64):  # another node may take the free device between GET_FREE and CONFIGURE
            n = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
            dev = f"/dev/loop{n}"
            fd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
            info = bytearray(232)
            struct.pack_into("I", info, 52, LO_FLAGS_AUTOCLEAR)  # lo_flags: detached with its last user
            cfg = struct.pack("II", img, 0) + bytes(info) + bytes(64)
            try:
                fcntl.ioctl(fd, LOOP_CONFIGURE, cfg)
            except OSError:
                os.close(fd)
                continue
            try:
                mount(
                    dev, target, "ext4", flags, "errors=remount-ro,noinit_itable"
                )  # no zeroing thread: a fresh sparse image reads as zeros
            finally:
                os.close(fd)  # the mount holds the device now; autoclear frees it at umount
            return
        raise OSError("no free loop device")
    finally:
        os.close(ctl)
        os.close(img)


def _populate(work: str, spec: dict) -> int:
    """script.py, submission/, tmp/, input/ on the fresh file system, owned by the node's uid."""
    uid, gid = spec.get("uid"), spec.get("gid")
    for name in ("submission", "tmp", "input"):
        os.mkdir(os.path.join(work, name), 0o755)
    with open(os.path.join(work, "script.py"), "wb") as fh:
        fh.write(spec["code"])
    lost = os.path.join(work, "lost+found")
    if os.path.isdir(lost):
        os.rmdir(lost)
    if uid is not None:
        for p in ("", "submission", "tmp", "script.py"):
            os.chown(os.path.join(work, p), uid, gid)
        os.chmod(work, 0o700)
    return os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _private_ancestor(path: str) -> str | None:
    """The first folder on the way to `path` that others may not traverse (e.g. /root, 0700)."""
    cur = "/"
    for part in path.strip("/").split("/"):
        cur = os.path.join(cur, part)
        if os.path.isdir(cur) and not os.stat(cur).st_mode & 0o001:
            return cur
    return None


def _expose(paths: list, jail: str) -> None:
    """Keep the interpreter reachable for the unprivileged script when it lives under a private
    folder (pyenv or conda under /root): cover that folder with an empty tmpfs and bind back only
    the interpreter's trees. Everything else in it (root's home) disappears from the jail."""
    groups: dict = {}
    for p in paths:
        anc = _private_ancestor(p)
        if anc is not None and p != anc:
            groups.setdefault(anc, []).append(p)
    for i, (anc, inner) in enumerate(groups.items()):
        _cover(anc, inner, jail, f"expose{i}", MS_NOSUID | MS_NODEV, "size=64k,mode=711")


def _cover(path: str, inner: list, jail: str, tag: str, flags: int, data: str) -> None:
    """An empty tmpfs over `path`, with the `inner` trees bound back at their own paths."""
    stash = []
    for j, p in enumerate(inner):
        s = os.path.join(jail, f".{tag}_{j}")
        os.mkdir(s, 0o700)
        mount(p, s, None, MS_BIND | MS_REC)
        stash.append((s, p))
    mount("tmpfs", path, "tmpfs", flags, data)
    for s, p in stash:
        os.makedirs(p, mode=0o711, exist_ok=True)
        mount(s, p, None, MS_BIND | MS_REC)
        check(_libc.umount2(s.encode(), MNT_DETACH), f"umount {s}")
        os.rmdir(s)


def open_submission(root_fd: int) -> int | None:
    """submission/submission.csv below a workspace descriptor opened before the script started, as
    a descriptor, or None. Every component is opened relative to the root descriptor with
    O_NOFOLLOW: a symlink anywhere (the folder, the file) ends the walk. The caller checks the type
    and size on the descriptor (fstat), so nothing can be swapped in between."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        sub = os.open("submission", flags | os.O_DIRECTORY, dir_fd=root_fd)
    except OSError:
        return None
    try:
        return os.open("submission.csv", flags, dir_fd=sub)
    except OSError:
        return None
    finally:
        os.close(sub)


def copy_submission(root_fd: int, out_fd: int, cap: int) -> str:
    """Copy submission/submission.csv to `out_fd` (1 marker byte, then the bytes); returns a note.
    FIFOs, devices, folders and files over `cap` are refused (`open_submission` walks safely)."""
    fd = open_submission(root_fd)
    if fd is None:
        os.write(out_fd, b"\0")
        return ""
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > cap:
            os.write(out_fd, b"\0")
            return "submission refused: not a regular file, or over the size cap"
        os.write(out_fd, b"\1")
        left = cap
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            os.write(out_fd, chunk)
            left -= len(chunk)
        return ""
    finally:
        os.close(fd)


def disk_note(root_fd: int) -> str:
    st = os.fstatvfs(root_fd)
    if st.f_favail == 0:
        return "disk full: the workspace's inode limit was reached"
    if st.f_bavail * st.f_frsize < max(2**20, st.f_blocks * st.f_frsize // 100):
        return "disk full: the workspace's byte limit was reached"
    return ""


_ARCH = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}


def deny_keyrings() -> None:
    """seccomp: add_key, request_key and keyctl fail with EPERM (the per-uid keyring would carry
    keys from one node to the next of its slot); a foreign syscall ABI (int 0x80, x32) is denied
    whole, so the same calls cannot be made under other numbers."""
    arch, nrs = _ARCH.get(os.uname().machine, (None, ()))
    if arch is None:
        raise OSError(f"no keyring filter for {os.uname().machine}")
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny, allow = 0x00050000 | 1, 0x7FFF0000
    prog = [
        (ld, 0, 0, 4),
        (jeq, 1, 0, arch),
        (ret, 0, 0, deny),
        (ld, 0, 0, 0),
        (jge, 0, 1, 0x40000000),
        (ret, 0, 0, deny),
    ]
    for nr in nrs:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    prog.append((ret, 0, 0, allow))
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HxxxxxxP", len(prog), ctypes.addressof(buf))
    check(_libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0), "seccomp")  # PR_SET_SECCOMP, FILTER
