"""The red-team's classes (issue 13), each by more than one route, each checked from outside.

Every test runs hostile scripts through `LocalBackend.run` as root (as CI does), asserts from the
host that the attack failed, and then that the next node on the same slot (one slot here) runs ok.
Classes: submission substitution, state shared between nodes, memory beyond the limit (shmem),
CPU beyond the cpuset, disk beyond its limits and trees cleanup cannot remove."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
from pathlib import Path

import psutil
import pytest
from executor_helpers import UID_BASE, assert_healthy, make_config, run_code, started

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="the kernel-enforced sandbox needs root (as in CI)"),
]
SUB = "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"


@pytest.fixture
async def backend(tmp_path):
    token = secrets.token_hex(8)
    public = tmp_path / "public" / "t"
    public.mkdir(parents=True)
    (public / "submission.csv").write_text(f"id,y\n1,{token}\n")  # a file named like a submission
    b = await started(make_config(tmp_path, timeout_s=20, max_concurrency=1))  # disk "auto": a tmpfs here
    assert b.jailed and b.cgroups is not None
    b.token = token
    yield b
    await b.close()


@pytest.fixture
async def loop_backend(tmp_path):
    """The same, with the node's disk a loop-mounted ext4 image (large declarations)."""
    b = await started(make_config(tmp_path, timeout_s=20, max_concurrency=1, local={"disk": "loop"}))
    assert b.jailed and b.cgroups is not None and b.disk == "loop"
    yield b
    await b.close()


@pytest.fixture(params=["tmpfs", "loop"])
def either(request, backend, loop_backend):
    return backend if request.param == "tmpfs" else loop_backend


# --- 1. submission substitution ---------------------------------------------------------------


async def test_a_symlinked_submission_folder_is_not_followed(backend):
    # the host path of the public data, as /proc/self/mountinfo tells the script (a host file
    # named submission.csv that the executor, reading as root, must not take for the node's)
    host = os.path.join(backend.cfg.public_data_roots[0], "t")
    code = (
        "import os\nprint(open('/proc/self/mountinfo').read())\n"
        f"os.rmdir('submission')\nos.symlink({host!r}, 'submission')\n"
    )
    out = await run_code(backend, code)
    assert out.status == "no_submission" and out.submission is None
    code = (
        "import os\nos.rmdir('submission')\nos.symlink(os.path.abspath('input'), 'submission')\n"
        "os.symlink('/etc/passwd', 'passwd')\n"
    )
    out = await run_code(backend, code, node="n2")
    assert out.status == "no_submission" and out.submission is None
    await assert_healthy(backend)


async def test_links_into_other_trees_never_become_the_submission(backend):
    routes = [
        "import os\nos.link('input/submission.csv', 'submission/submission.csv')\n",  # another fs: EXDEV
        "import os\nos.symlink('../input/submission.csv', 'submission/submission.csv')\n",
        "import os\nos.rmdir('submission')\nos.symlink('/proc/self/cwd/input', 'submission')\n",
        "import os\nos.mkfifo('submission/submission.csv')\n",
    ]
    for i, code in enumerate(routes):
        out = await run_code(backend, code, node=f"n{i}")
        assert out.submission is None and backend.token not in out.term_tail, (i, out)
        assert out.status in ("no_submission", "crashed"), (i, out)
    await assert_healthy(backend)


async def test_the_launcher_spec_and_workspace_paths_are_not_visible_inside(backend):
    code = (
        """import glob
print('argv', open('/proc/1/cmdline', 'rb').read().split(b'\\0')[:-1])
for p in glob.glob('/sys/block/loop*/loop/backing_file'):
    print('image', open(p).read().strip())
"""
        + SUB
    )
    out = await run_code(backend, code)
    assert out.status == "ok", out.term_tail
    argv = eval(out.term_tail.split("argv ", 1)[1].split("\n", 1)[0])
    assert len(argv) == 4 and argv[-1].endswith(b"_launch.py"), argv  # python -I -S _launch.py: no spec
    # an image's real path shows through sysfs, but its folder is masked and its name is random
    images = [ln.split()[1] for ln in out.term_tail.splitlines() if ln.startswith("image ")]
    assert all("r1" not in Path(x).name and "n1" not in Path(x).name for x in images)
    await assert_healthy(backend)


async def test_a_sibling_cannot_make_another_nodes_submission_its_own(tmp_path):
    b = await started(make_config(tmp_path, timeout_s=20, max_concurrency=2))
    victim_token = secrets.token_hex(8)
    victim = f"import time\nopen('submission/submission.csv', 'w').write('{victim_token}')\ntime.sleep(3)\n"
    attacker = f"""import glob, os, time
time.sleep(1)
root = {b.cfg.local.workspace_root!r}
images = [open(p).read().strip() for p in glob.glob('/sys/block/loop*/loop/backing_file')]
# the sibling's folder from its node id (the old layout), last: the link left in place wins
for target in [*images, *map(os.path.dirname, images), root, root + '/r1.victim/submission']:
    try:
        os.rmdir('submission')
    except OSError:
        os.unlink('submission')
    os.symlink(target, 'submission')
    print('linked', target, os.path.exists('submission/submission.csv'))
"""
    good, bad = await asyncio.gather(
        run_code(b, victim, node="victim"), run_code(b, attacker, node="attacker")
    )
    assert good.status == "ok" and good.submission == victim_token.encode()
    assert bad.submission is None and victim_token not in bad.term_tail
    await assert_healthy(b)
    await b.close()


# --- 2. nothing shared between nodes ----------------------------------------------------------


async def test_files_left_in_shared_places_are_not_seen_by_the_next_node(backend):
    places = ["/run/lock", "/run", "/var/tmp", "/dev/shm", "/dev/mqueue", "/tmp"]
    marker = f"tg-left-{secrets.token_hex(6)}"
    leave = (
        f"for d in {places!r}:\n    try:\n        open(d + '/{marker}', 'w').write('x')\n"
        f"    except OSError as e:\n        print('no', d, e)\n" + SUB
    )
    out = await run_code(backend, leave)
    assert out.status == "ok", out.term_tail
    look = f"import os\nprint('found', [d for d in {places!r} if os.path.exists(d + '/{marker}')])\n" + SUB
    out = await run_code(backend, look, node="n2")
    assert out.status == "ok" and "found []" in out.term_tail, out.term_tail
    assert not [d for d in places if os.path.exists(f"{d}/{marker}")]  # nor on the host
    await assert_healthy(backend)


KEYCTL = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': (248, 250), 'aarch64': (217, 219)}[os.uname().machine]
"""


async def test_keyrings_cannot_carry_a_key_to_the_next_node(backend):
    secret = secrets.token_hex(8)
    add = (
        KEYCTL
        + (
            f"kid = libc.syscall(nr[0], b'user', b'tg-key', b'{secret}', 8, -4)  # @u, the uid's keyring\n"
            "print('add_key', kid, os.strerror(ctypes.get_errno()))\n"
            "kid = libc.syscall(nr[0], b'user', b'tg-key', b'x', 1, -3)  # @s\n"
            "print('session', kid, os.strerror(ctypes.get_errno()))\n"
        )
        + SUB
    )
    out = await run_code(backend, add)
    assert out.status == "ok", out.term_tail
    assert "add_key -1 Operation not permitted" in out.term_tail and "session -1" in out.term_tail
    read = (
        KEYCTL
        + (
            "buf = ctypes.create_string_buffer(64)\n"
            "for ring in (-4, -3, -5):\n"
            "    n = libc.syscall(nr[1], 10, ring, buf, 64)  # KEYCTL_READ of the keyring\n"
            "    print('read', ring, n, os.strerror(ctypes.get_errno()))\n"
        )
        + SUB
    )
    out = await run_code(backend, read, node="n2")
    assert out.status == "ok" and secret not in out.term_tail
    assert out.term_tail.count("Operation not permitted") == 3, out.term_tail
    await assert_healthy(backend)


async def test_a_host_unix_socket_cannot_be_reached(backend):
    spots = [Path(f"/var/lib/tg-sock-{secrets.token_hex(4)}"), Path(f"/run/tg-sock-{secrets.token_hex(4)}")]
    listeners = []
    try:
        for d in spots:
            d.mkdir(mode=0o755)
            s = socket.socket(socket.AF_UNIX)
            s.bind(str(d / "daemon.sock"))
            os.chmod(d / "daemon.sock", 0o666)  # as dbus and journald sockets are
            s.listen(4)
            s.setblocking(False)
            listeners.append(s)
        code = (
            "import socket\nfor p in %r:\n    c = socket.socket(socket.AF_UNIX)\n    try:\n"
            "        c.connect(p)\n        c.send(b'hello')\n        print('CONNECTED', p)\n"
            "    except OSError as e:\n        print('refused', p, type(e).__name__)\n"
            % [str(d / "daemon.sock") for d in spots]
        ) + SUB
        out = await run_code(backend, code)
        for s in listeners:
            with pytest.raises(BlockingIOError):
                s.accept()
        assert out.status == "ok" and "CONNECTED" not in out.term_tail, out.term_tail
    finally:
        for s in listeners:
            s.close()
        for d in spots:
            shutil.rmtree(d, ignore_errors=True)
    await assert_healthy(backend)


# --- 3. memory, shmem included ----------------------------------------------------------------

MEMFD = "fds = [os.memfd_create(f'x{k}') for k in range(3)]\n"  # one memfd stops at RLIMIT_FSIZE (ephemeral)


@pytest.mark.parametrize("disk", ["loop", "tmpfs"])
@pytest.mark.parametrize(
    "route",
    [  # the writing routes fill 1-3 GiB page by page: slow suite
        pytest.param(
            MEMFD + "for fd in fds:\n    os.posix_fallocate(fd, 0, 2**30 - 2**20)\n", id="memfd-fallocate"
        ),
        pytest.param(
            MEMFD
            + "for fd in fds:\n    for i in range(1023):\n        os.pwrite(fd, b'x' * 2**20, i * 2**20)\n",
            id="memfd-write",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "with open('/dev/shm/big', 'wb') as f:\n"
            "    for _ in range(1536):\n        f.write(b'x' * 2**20)\n",
            id="dev-shm",
            marks=pytest.mark.slow,
        ),
    ],
)
async def test_shared_memory_beyond_the_limit_is_killed_by_the_kernel(tmp_path, route, disk):
    # 1 GiB of memory, 1 GiB of disk (a tmpfs disk raises the node's memory limit by its size):
    # 3 GiB of shmem is over either way
    b = await started(
        make_config(tmp_path, max_concurrency=1, caps={"ephemeral_gib": 1}, local={"disk": disk})
    )
    out = await run_code(b, "import os\n" + route + SUB)
    assert out.status == "crashed", out
    if "/dev/shm" in route:  # the private /dev/shm is half the node's memory: full before the cgroup is
        assert "No space left on device" in out.term_tail, out
    else:
        assert out.exc_type == "MemoryError" and "memory limit reached" in out.term_tail, out
    await assert_healthy(b)
    await b.close()


# --- 4. CPU set -------------------------------------------------------------------------------


async def test_sched_setaffinity_cannot_widen_the_cpu_set(backend):
    code = (
        "import os, time\ntry:\n    os.sched_setaffinity(0, range(os.cpu_count()))\nexcept OSError as e:\n"
        "    print('refused', e)\nprint('cpus', sorted(os.sched_getaffinity(0)))\ntime.sleep(2)\n" + SUB
    )
    task = asyncio.create_task(run_code(backend, code))
    seen = set()
    while not task.done():
        for p in psutil.process_iter(["uids"]):
            if p.info["uids"] and UID_BASE <= p.info["uids"].real < UID_BASE + 8:
                try:
                    seen.add(tuple(p.cpu_affinity()))
                except psutil.Error:
                    pass
        await asyncio.sleep(0.2)
    out = task.result()
    assert out.status == "ok", out.term_tail
    assert seen and all(len(s) == 1 for s in seen), seen  # caps.cpu = 1, seen from the host
    assert "cpus [0]" in out.term_tail or "cpus [1]" in out.term_tail
    await assert_healthy(backend)


# --- 5. disk: bytes, inodes, trees cleanup must remove ----------------------------------------


async def test_many_directories_stop_at_the_inode_limit(either):
    code = "import os\nfor i in range(30000):\n    os.mkdir(f'd{i}')\n" + SUB
    out = await run_code(either, code)
    assert (out.status, out.exc_type) == ("crashed", "DiskQuotaExceeded"), out
    assert "inode limit" in out.term_tail
    await assert_healthy(either)


async def test_many_files_stop_at_the_byte_limit(either):
    code = "b = b'x' * 2**20\nfor i in range(200):\n    open(f'f{i}', 'wb').write(b)\n" + SUB
    out = await run_code(either, code)
    assert (out.status, out.exc_type) == ("crashed", "DiskQuotaExceeded"), out
    assert "byte limit" in out.term_tail
    await assert_healthy(either)


async def test_a_deep_long_named_locked_tree_left_behind_is_removed(either):
    code = (
        """import os
for i in range(1500):
    name = ('d%d' % i).ljust(200, 'x')
    os.mkdir(name)
    os.chdir(name)
open('data', 'wb').write(b'x' * 4096)
os.chmod('.', 0)
print('depth path bytes', len(os.getcwd()) if False else 1500 * 201)
os.chdir('/mnt/work')
os.chmod('d0'.ljust(200, 'x'), 0)
"""
        + SUB
    )
    out = await run_code(either, code)
    assert out.status == "ok", out.term_tail
    await assert_healthy(either)


async def test_a_thread_bomb_stops_at_the_pids_limit(backend):
    code = (
        "import threading, time\nn = 0\ntry:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n        n += 1\n"
        "except RuntimeError as e:\n    print('stopped at', n, e)\n" + SUB
    )
    out = await run_code(backend, code)
    assert out.status == "ok" and "stopped at" in out.term_tail, out.term_tail
    assert int(out.term_tail.split("stopped at ")[1].split()[0]) < backend.cfg.caps.nproc
    await assert_healthy(backend)


# --- without cgroups --------------------------------------------------------------------------


async def test_without_cgroups_the_sandbox_says_what_is_lost_and_still_runs(tmp_path, caplog):
    b = await started(make_config(tmp_path, local={"cgroups": False}, max_concurrency=1))
    assert b.cgroups is None and "WITHOUT cgroups" in caplog.text and "sched_setaffinity" in caplog.text
    out = await run_code(b, "x = bytearray(3 * 2**29)\n" + SUB)  # RLIMIT_AS still holds
    assert (out.status, out.exc_type) == ("crashed", "MemoryError")
    await assert_healthy(b)
    await b.close()


async def test_an_unusable_cgroup_tree_degrades_with_a_warning(tmp_path, caplog):
    b = await started(make_config(tmp_path, local={"cgroup_root": str(tmp_path / "nocg")}, max_concurrency=1))
    assert b.cgroups is None and "no usable cgroups" in caplog.text
    await assert_healthy(b)
    await b.close()
