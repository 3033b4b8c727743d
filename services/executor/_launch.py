"""Sandbox launcher: run as `python -I -S _launch.py <spec>` by the local backend (stdlib only).

Started as root, it builds the node's jail and then becomes nothing but a waiter:

  launcher (root, host pid ns)           forwards SIGTERM as SIGKILL to the jail's init
    `- init (root, pid 1 of a new pid/mount/net/ipc/uts namespace)
         masks the hidden folders with empty read-only tmpfs, mounts a private /proc,
         bind-mounts the public data read-only on ./input, then reaps
         `- script (uid/gid of the node's slot, no groups, no_new_privs, rlimits, cpu affinity)
              python -I -u script.py, cwd = the workspace

When the script exits, init exits, and the kernel kills every process left in the pid namespace
(a background child cannot outlive its node). Killing init from outside has the same effect.
A new network namespace has only a loopback device, down: no network at all.
Exit status: the script's exit code, or 128 + signal number when a signal ended it.
"""

import _signal as signal  # not `signal`/`json`: their enum/re imports cost ~60 ms of start-up per node
import ctypes
import marshal
import os
import resource
import sys
import time as _time  # built in, like the others: no start-up cost

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
SETUP_FAILED = 125  # the jail could not be built: the executor records it, the script never ran
ELAPSED_MARK = "treegrpo elapsed "  # the launcher's last stderr line: the node's wall time in seconds

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None) -> None:
    enc = [None if x is None else x.encode() for x in (src, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def _build_jail(spec: dict) -> None:
    """Mounts inside the new mount namespace (init, still root)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks to the host
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    src, dst = spec.get("input_src"), os.path.join(spec["workspace"], "input")
    if src:
        _mount(src, dst, None, MS_BIND | MS_REC)
        _mount(None, dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_REC)
    # the workspace reappears at a fixed, world-traversable path: its real parents (e.g. a 0700
    # /tmp/pytest-of-root) need not be, and the script never learns where it really lives
    jail = spec["jail_dir"]
    _mount("tmpfs", jail, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
    os.mkdir(os.path.join(jail, "work"), 0o755)
    _mount(spec["workspace"], os.path.join(jail, "work"), None, MS_BIND | MS_REC)
    for k, (path, size) in enumerate(spec.get("private_tmp", [])):  # world-writable host folders
        if os.path.isdir(path):  # become the node's own; an interpreter living there stays (a CI clone in /tmp)
            inner = [t for t in spec.get("expose", []) if t.startswith(path.rstrip("/") + "/")]
            _cover(path, inner, jail, f"tmp{k}", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    for dev in spec.get("mask_devices", []):  # GPUs that are not the node's: /dev/null in their place
        if os.path.exists(dev):
            _mount("/dev/null", dev, None, MS_BIND)
    _expose(spec.get("expose", []), jail)
    for path in spec.get("hide", []):  # last: a hidden folder may be an ancestor of the workspace
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")


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


def _cover(path: str, inner: list[str], jail: str, tag: str, flags: int, data: str) -> None:
    """An empty tmpfs over `path`, with the `inner` trees bound back at their own paths."""
    stash = []
    for j, p in enumerate(inner):
        s = os.path.join(jail, f".{tag}_{j}")
        os.mkdir(s, 0o700)
        _mount(p, s, None, MS_BIND | MS_REC)
        stash.append((s, p))
    _mount("tmpfs", path, "tmpfs", flags, data)
    for s, p in stash:
        os.makedirs(p, mode=0o711, exist_ok=True)
        _mount(s, p, None, MS_BIND | MS_REC)
        _check(_libc.umount2(s.encode(), MNT_DETACH), f"umount {s}")
        os.rmdir(s)


def _become_script(spec: dict) -> None:
    """The grandchild: limits, then the unprivileged identity, then exec. Never returns."""
    os.setsid()
    for name, value in spec.get("rlimits", {}).items():
        lim = getattr(resource, f"RLIMIT_{name}")
        soft, hard = (value, value) if name != "CPU" else (value, value + 5)
        resource.setrlimit(lim, (soft, hard))
    if spec.get("cpus"):
        os.sched_setaffinity(0, spec["cpus"])
    uid, gid = spec.get("uid"), spec.get("gid")
    if gid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
    if uid is not None:
        os.setresuid(uid, uid, uid)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.chdir(spec["cwd"])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    argv = spec["argv"]
    err = os.dup(2)
    os.set_inheritable(err, False)
    os.dup2(1, 2)  # the script's stderr joins its stdout, in order; ours stays separate
    try:
        os.execve(argv[0], argv, spec["env"])
    except OSError as exc:
        os.write(err, f"treegrpo sandbox setup failed: exec {argv[0]}: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)


def _exit_code(status: int) -> int:
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _init(spec: dict, jailed: bool) -> None:
    """pid 1 of the jail: build it, start the script, reap everything, exit with the script's code."""
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the script come back to us
    try:
        if jailed:
            _build_jail(spec)
        pid = os.fork()
    except OSError as exc:
        os.write(2, f"treegrpo sandbox setup failed: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    if pid == 0:
        try:
            _become_script(spec)
        except Exception as exc:  # report and die; never run the script half-jailed
            os.write(2, f"treegrpo sandbox setup failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    code, script_done = SETUP_FAILED, False
    while True:
        if script_done:
            _kill_children()  # orphans reparented to us (we are their subreaper)
        try:
            done, status = os.wait()
        except ChildProcessError:
            break
        if done == pid:
            code, script_done = _exit_code(status), True
            if jailed:
                break  # our exit kills whatever the script left behind in the namespace
            _kill_as(spec.get("uid"))  # no namespace: end every process of the slot's uid
    os._exit(code)


def _kill_as(uid) -> None:
    """kill(-1) as the sandbox uid reaches exactly that uid's processes (setsid cannot escape it)."""
    if uid is None:
        return
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(helper, 0)


def _kill_children() -> None:
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid == me:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


def main() -> None:
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))  # the spec: a dict of plain values, see encode_spec
    jailed = bool(spec.get("namespaces"))
    if jailed:
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
        try:
            _check(_libc.unshare(flags), "unshare")
        except OSError as exc:
            os.write(2, f"treegrpo sandbox setup failed: {exc}\n".encode())
            os._exit(SETUP_FAILED)
    started = _time.monotonic()
    pid = os.fork()
    if pid == 0:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _init(spec, jailed)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    # the node's own time, measured here: the executor may have been frozen when it ended
    os.write(2, f"{ELAPSED_MARK}{_time.monotonic() - started:.4f}\n".encode())
    os._exit(_exit_code(status))


def encode_spec(spec: dict) -> str:
    """What the executor passes as argv[1]: marshal is built in, so decoding costs no import."""
    return marshal.dumps(spec).hex()


if __name__ == "__main__":
    main()
