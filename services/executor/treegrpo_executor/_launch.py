"""Sandbox launcher: run as `python -I -S _launch.py` by the local backend (stdlib only).

The spec (a marshal'ed dict of plain values, see `encode_spec`) arrives on stdin, never in argv:
argv is readable by anyone at /proc/<pid>/cmdline, the script included. Started as root, the
launcher joins the node's cgroups (so every process of the node is inside from the start), builds
the jail and then becomes nothing but a waiter:

  launcher (root, host pid ns)           forwards SIGTERM as SIGKILL to the jail's init
    `- init (root, pid 1 of a new pid/mount/net/ipc/uts namespace)
         builds the jail (`_jail.build`: the node's own size- and inode-limited file system at
         <jail_dir>/work, private /tmp /var/tmp /run /dev/shm /dev/mqueue, host sockets and hidden
         folders masked, public data read-only at ./input), then reaps
         `- script (uid/gid of the node's slot, no groups, no_new_privs, keyring syscalls denied,
              rlimits, cpu affinity), python -I -u script.py, cwd = the workspace

When the script exits, init kills everything else in the namespace, copies the submission out
through the result descriptor (`result_fd`) and exits; the namespace and its mounts die with it. Killing
init from outside has the same effect, without the copy. A new network namespace has only a
loopback device, down: no network at all.
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
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
SETUP_FAILED = 125  # the jail could not be built: the executor records it, the script never ran
NOTE = "treegrpo sandbox note: "
ELAPSED_MARK = "treegrpo elapsed "  # the launcher's last stderr line: the node's wall time in seconds

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _become_script(spec: dict, jailed: bool) -> None:
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
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.chdir(spec["cwd"])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    if jailed:
        import _jail

        _jail.deny_keyrings()  # last: everything above may still need any syscall
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
    root_fd = None
    try:
        if jailed:
            import _jail

            if spec.get("probe"):
                _jail.probe(spec)
            else:
                root_fd = _jail.build(spec)
        pid = os.fork()
    except OSError as exc:
        os.write(2, f"treegrpo sandbox setup failed: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    if pid == 0:
        try:
            _become_script(spec, jailed)
        except Exception as exc:  # report and die; never run the script half-jailed
            os.write(2, f"treegrpo sandbox setup failed: {exc!r}\n".encode())
        os._exit(SETUP_FAILED)
    code = _reap(pid, spec, jailed)
    if root_fd is not None:
        _collect(root_fd, spec)
    os._exit(code)


def _reap(pid: int, spec: dict, jailed: bool) -> int:
    """Wait for the script; then nothing else of the node may live on (or touch its files)."""
    code, script_done = SETUP_FAILED, False
    while True:
        if script_done:
            _kill_children()  # orphans reparented to us (we are their subreaper)
        try:
            done, status = os.wait()
        except ChildProcessError:
            return code
        if done == pid:
            code, script_done = _exit_code(status), True
            if jailed:
                try:
                    os.kill(-1, signal.SIGKILL)  # as pid 1: every other process of the namespace
                except ProcessLookupError:
                    pass  # there was none
            else:
                _kill_as(spec.get("uid"))  # no namespace: end every process of the slot's uid


def _collect(root_fd: int, spec: dict) -> None:
    """Copy the submission out (nothing of the script runs any more) and say why a limit was hit."""
    import _jail

    notes = []
    try:
        notes.append(_jail.copy_submission(root_fd, spec["result_fd"], spec["submission_cap"]))
        notes.append(_jail.disk_note(root_fd))
    except OSError as exc:
        notes.append(f"submission not copied: {exc}")
    for note in filter(None, notes):
        os.write(2, f"{NOTE}{note}\n".encode())


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


def _read_spec() -> dict:
    """The spec from stdin, which then becomes /dev/null for the script."""
    chunks = []
    while chunk := os.read(0, 1 << 20):
        chunks.append(chunk)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return marshal.loads(b"".join(chunks))


def _join_cgroups(spec: dict) -> None:
    me = str(os.getpid()).encode()
    for procs in spec.get("cgroup_procs", []):
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, me)
        finally:
            os.close(fd)


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `_jail`, next to us
    try:
        spec = _read_spec()
        if "result_fd" in spec:
            os.set_inheritable(spec["result_fd"], False)  # for init only: never across the script's exec
        _join_cgroups(spec)
        jailed = bool(spec.get("namespaces"))
        if jailed:
            flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
            _check(_libc.unshare(flags), "unshare")
    except (OSError, ValueError, EOFError) as exc:
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


def encode_spec(spec: dict) -> bytes:
    """What the executor writes to the launcher's stdin: marshal is built in, so decoding costs no import."""
    return marshal.dumps(spec)


if __name__ == "__main__":
    main()
