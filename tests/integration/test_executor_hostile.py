"""Hostile scripts against the local sandbox: each is contained, and the host and service stay healthy.

These need no NATS; they run real sandboxed processes (root + namespaces here and in CI)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import uuid
from pathlib import Path

import psutil
import pytest
from executor_helpers import assert_healthy, make_config, run_code, started, world_readable_dir

pytestmark = pytest.mark.timeout(90)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uid drop and namespaces need root (as in CI)")


@pytest.fixture
async def backend(tmp_path):
    b = await started(make_config(tmp_path, timeout_s=4))
    assert b.jailed or os.geteuid() != 0
    yield b
    await b.close()


async def test_fork_bomb_is_contained_and_service_survives(backend):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    out = await run_code(backend, code)
    assert out.status == "timeout"
    assert psutil.Process().is_running()
    await assert_healthy(backend)


async def test_allocating_64_gib_is_a_memory_error(backend):
    out = await run_code(backend, "x = bytearray(64 * 2**30)\nprint(len(x))\n")
    assert (out.status, out.exc_type) == ("crashed", "MemoryError")
    await assert_healthy(backend)


async def test_writing_10_gib_to_one_file_stops_at_the_file_size_limit(backend):
    code = (
        "b = b'x' * 2**20\nwith open('big.bin', 'wb') as f:\n"
        "    for _ in range(10 * 1024):\n        f.write(b)\n"
    )
    out = await run_code(backend, code)
    assert (out.status, out.exc_type) == ("crashed", "OSError")
    assert "File too large" in out.term_tail
    await assert_healthy(backend)


async def test_filling_the_workspace_with_many_files_stops_at_its_byte_limit(backend):
    code = (
        "import time\nb = b'x' * 2**20\nfor i in range(10 * 1024):\n"
        "    open(f'f{i}.bin', 'wb').write(b * 8)\n    time.sleep(0.01)\n"
    )
    out = await run_code(backend, code)
    assert (out.status, out.exc_type) == ("crashed", "DiskQuotaExceeded")
    await assert_healthy(backend)


async def test_busy_loop_times_out_and_whole_sandbox_is_killed(backend):
    out = await run_code(backend, "while True: pass\n")
    assert out.status == "timeout" and 3.5 < out.exec_time < 10
    await assert_healthy(backend)


async def test_printing_1_gib_is_cut_off_at_the_output_cap(backend):
    code = "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(2**20):\n    sys.stdout.write(line)\n"
    out = await run_code(backend, code)
    assert (out.status, out.exc_type) == ("crashed", "OutputLimitExceeded")
    assert len(out.term_tail.encode()) <= backend.cfg.tail_bytes
    await assert_healthy(backend)


@needs_root
async def test_socket_to_a_loopback_port_cannot_connect(backend):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    code = (
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "open('submission/submission.csv', 'w').write('connected')\n"
    )
    try:
        out = await run_code(backend, code)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert out.status == "crashed" and out.exc_type in ("OSError", "ConnectionRefusedError")
    assert out.submission is None
    await assert_healthy(backend)


@needs_root
async def test_parent_and_absolute_paths_outside_the_workspace_are_not_readable(tmp_path):
    b = await started(make_config(tmp_path))
    other = tmp_path / "ws" / "r0.othernode"
    other.mkdir(parents=True)
    os.chmod(other, 0o755)
    (other / "secret.txt").write_text("OTHER-NODE-SECRET")
    os.chmod(other / "secret.txt", 0o644)
    code = f"""import os, json
res = {{}}
for p in ['..', '../..', {str(tmp_path / "ws")!r}, {str(other / "secret.txt")!r}, '/root', '/etc/hostname']:
    try:
        res[p] = sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read()[:100]
    except Exception as e:
        res[p] = type(e).__name__
open('submission/submission.csv', 'w').write(json.dumps(res))
"""
    out = await run_code(b, code)
    assert out.status == "ok", out.term_tail
    res = __import__("json").loads(out.submission)
    assert res[".."] == ["work"] and res["../.."] != res[".."]
    assert res[str(tmp_path / "ws")] in ([], "PermissionError", "FileNotFoundError")
    assert res[str(other / "secret.txt")] in ("FileNotFoundError", "PermissionError")
    assert "OTHER-NODE-SECRET" not in out.submission.decode()
    assert res["/root"] in ([], ".pyenv", "PermissionError") or "secret" not in str(res["/root"])
    shutil.rmtree(other)
    await assert_healthy(b)
    await b.close()


@needs_root
async def test_script_looking_for_the_answers_files_cannot_find_or_read_them(tmp_path):
    base = world_readable_dir()
    try:
        token = "ANSWER-TOKEN-" + secrets.token_hex(
            8
        )  # made at run time: no file on disk (this one included) holds it
        mle = base / "mlebench"  # MLE-bench layout, deliberately world-readable: only the mask protects it
        (mle / "comp" / "prepared" / "private").mkdir(parents=True)
        (mle / "comp" / "prepared" / "public").mkdir(parents=True)
        (mle / "comp" / "prepared" / "public" / "train.csv").write_text("id,y\n1,0\n")
        (mle / "comp" / "prepared" / "private" / "answers.csv").write_text(f"id,y\n1,{token}\n")
        (mle / "comp" / "raw").mkdir()  # MLE-bench keeps the original labelled data here
        (mle / "comp" / "raw" / "train.csv").write_text(f"id,y\n1,{token}\n")
        (mle / "other" / "prepared" / "private").mkdir(parents=True)  # another task's answers
        (mle / "other" / "prepared" / "private" / "answers.csv").write_text(f"id,y\n1,{token}\n")
        home_private = (
            base / "home" / "tasks" / "private" / "comp"
        )  # the built-in layout, 0700 as the grader makes it
        home_private.mkdir(parents=True)
        (home_private / "answers.csv").write_text(f"id,y\n1,{token}\n")
        os.chmod(base / "home" / "tasks" / "private", 0o700)
        for p in base.rglob("*"):
            if p.is_dir() and p != base / "home" / "tasks" / "private":
                os.chmod(p, 0o755)
            elif p.is_file():
                os.chmod(p, 0o644)
        assert token in (mle / "comp" / "prepared" / "private" / "answers.csv").read_text()
        cfg = make_config(
            tmp_path,
            public_data_roots=[str(mle)],
            local={"hidden_paths": [str(base / "home" / "tasks" / "private")]},
        )
        b = await started(cfg)
        code = f"""import os
found, names = [], []
import sys
interpreter = (sys.prefix, sys.base_prefix)  # installed packages (e.g. transformers' *question_answering.py)
for top in [{str(base)!r}, '/tmp', '/mnt', '..', '/']:
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not os.path.join(dirpath, d).startswith(interpreter)]
        if dirpath == '/':
            skip = ('proc', 'sys', 'dev', 'usr', 'lib', 'lib64', 'bin', 'sbin', 'work', 'var', 'opt', 'etc',
                    'boot', 'tmp', 'mnt')
            dirs[:] = [d for d in dirs if d not in skip]
        for f in files:
            path = os.path.join(dirpath, f)
            if f == 'script.py':
                continue  # this very script holds the token it is looking for
            if 'answer' in f:
                names.append(path)
            try:
                if os.path.getsize(path) < 2**20 and {token!r} in open(path, errors='ignore').read():
                    found.append(path)
            except Exception:
                pass
for p in [{str(mle / "comp" / "prepared" / "private" / "answers.csv")!r},
          {str(home_private / "answers.csv")!r},
          {str(mle / "comp" / "raw" / "train.csv")!r},
          {str(mle / "other" / "prepared" / "private" / "answers.csv")!r},
          '../input/../../answers.csv', 'input/../prepared/private/answers.csv']:
    try:
        found.append(open(p).read())
    except Exception as e:
        print('denied', p, type(e).__name__)
print('input sees', sorted(os.listdir('input')))
open('submission/submission.csv', 'w').write(repr((found, names)))
"""
        out = await run_code(b, code, task="comp")
        assert out.status == "ok", out.term_tail
        assert token not in out.submission.decode() and token not in out.term_tail
        assert eval(out.submission.decode()) == ([], [])
        assert "input sees ['train.csv']" in out.term_tail  # the public data is there: the walk did run
        await assert_healthy(b)
        await b.close()
    finally:
        shutil.rmtree(base)


@needs_root
async def test_killing_its_parent_leaves_the_executor_unharmed(backend):
    code = (
        "import os\nfor pid in (os.getppid(), 1):\n    try:\n        os.kill(pid, 9)\n"
        "    except Exception as e:\n        print(type(e).__name__)\n"
        "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
    )
    out = await run_code(backend, code)
    assert out.status == "ok", out.term_tail
    # kill(-1) signals every process the caller may signal except itself: in the jail there is none
    out = await run_code(backend, "import os, signal\nos.kill(-1, signal.SIGKILL)\n", node="n2")
    assert (out.status, out.exc_type) == ("crashed", "ProcessLookupError")
    await assert_healthy(backend)


async def test_background_child_left_behind_is_killed_when_the_node_ends(backend):
    code = (
        "import subprocess, os\nsubprocess.Popen(['sleep', '987.654'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    import time\n    time.sleep(987.655)\n"
        "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
    )
    out = await run_code(backend, code)
    assert out.status == "ok"
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if "987.65" in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []
    await assert_healthy(backend)


async def test_syntax_error_is_a_crash_with_its_exception_type(backend):
    out = await run_code(backend, "def broken(:\n    pass\n")
    assert (out.status, out.exc_type) == ("crashed", "SyntaxError")
    await assert_healthy(backend)


async def test_binary_garbage_as_code_is_a_crash_not_an_executor_error(backend):
    garbage = bytes(range(256)).decode("latin-1") * 4
    out = await run_code(backend, garbage)
    assert out.status == "crashed" and out.exc_type == "SyntaxError"
    out = await run_code(backend, "\udcff\udcfe garbage \x7f", node="n2")
    assert out.status == "crashed"
    await assert_healthy(backend)


async def test_one_nodes_failure_does_not_disturb_a_concurrent_node(backend):
    import asyncio

    ok_code = "import time\ntime.sleep(1)\nopen('submission/submission.csv','w').write('id\\n1\\n')\n"
    bad_code = "import os\nos.kill(os.getpid(), 9)\n"
    good, bad = await asyncio.gather(
        run_code(backend, ok_code, node="good"), run_code(backend, bad_code, node="bad")
    )
    assert good.status == "ok" and (bad.status, bad.exc_type) == ("crashed", "SIGKILL")
    await assert_healthy(backend)


@needs_root
async def test_without_namespaces_the_uid_drop_still_contains_children_and_private_answers(tmp_path):
    base = world_readable_dir()
    try:
        private = base / "private" / "comp"
        private.mkdir(parents=True)
        (private / "answers.csv").write_text("id,y\n1,SECRET-0700\n")
        os.chmod(base / "private", 0o700)
        # unjailed, the script reaches the interpreter by its real path: this venv's base lives under
        # /root (0700) here, so the system python stands in for it
        if not os.access("/usr/bin/python3", os.X_OK):
            pytest.skip("no system python3 to run unjailed scripts with")
        cfg = make_config(
            tmp_path,
            local={"namespaces": False, "workspace_root": str(base / "ws"), "python": "/usr/bin/python3"},
        )
        b = await started(cfg)
        assert not b.jailed
        code = (
            f"import subprocess\nsubprocess.Popen(['sleep', '987.656'], start_new_session=True)\n"
            f"try:\n    print(open({str(private / 'answers.csv')!r}).read())\nexcept Exception as e:\n"
            f"    print('denied', type(e).__name__)\n"
            f"open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
        )
        out = await run_code(b, code)
        assert (
            out.status == "ok" and "denied PermissionError" in out.term_tail and "SECRET" not in out.term_tail
        )
        leftovers = [
            p for p in psutil.process_iter(["cmdline"]) if "987.656" in " ".join(p.info["cmdline"] or [])
        ]
        assert leftovers == []
        await assert_healthy(b)
        await b.close()
    finally:
        shutil.rmtree(base)


@needs_root
async def test_writes_to_world_writable_host_folders_stay_inside_the_jail(backend, tmp_path):
    marker = f"tg-escape-{uuid.uuid4().hex}"  # unique: an escape in one run cannot fail the next
    code = (
        f"for d in ('/tmp', '/var/tmp', '/dev/shm'):\n    open(d + '/{marker}', 'w').write('x')\n"
        "open('submission/submission.csv', 'w').write('id\\n1\\n')\n"
    )
    out = await run_code(backend, code)
    escaped = [f"{d}/{marker}" for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.exists(f"{d}/{marker}")]
    for path in escaped:
        os.unlink(path)
    assert out.status == "ok", out.term_tail
    assert not escaped
    await assert_healthy(backend)


@needs_root
async def test_answers_generated_by_the_grader_are_invisible_to_a_searching_script(tmp_path):
    """The grader's own built-in task generation writes the answers; a script that searches the task
    home for them (by name and by content hash) finds nothing, while the public data is there."""
    import hashlib

    from treegrpo.tasks import ensure_builtin_tasks

    base = world_readable_dir()
    try:
        home = base / "home"
        task = ensure_builtin_tasks(home, tasks=["spooky-mini"])["spooky-mini"]
        answers = home / "tasks" / "private" / "spooky-mini" / "answers.csv"
        digest = hashlib.sha256(answers.read_bytes()).hexdigest()
        os.chmod(home, 0o755)
        cfg = make_config(
            tmp_path,
            public_data_roots=[str(home / "tasks" / "public")],
            local={"hidden_paths": [str(home / "tasks" / "private")]},
        )
        b = await started(cfg)
        code = f"""import hashlib, os
hits, names = [], []
for top in [{str(home)!r}, {str(base)!r}, '..', '/mnt']:
    for dirpath, dirs, files in os.walk(top):
        for f in files:
            p = os.path.join(dirpath, f)
            if 'answer' in f:
                names.append(p)
            try:
                if hashlib.sha256(open(p, 'rb').read()).hexdigest() == {digest!r}:
                    hits.append(p)
            except Exception:
                pass
print('public', sorted(os.listdir('input')))
open('submission/submission.csv', 'w').write(repr((hits, names)))
"""
        out = await run_code(b, code, task="spooky-mini")
        assert out.status == "ok", out.term_tail
        assert eval(out.submission.decode()) == ([], [])
        assert "train.csv" in out.term_tail and Path(task.private_dir) == answers.parent
        await assert_healthy(b)
        await b.close()
    finally:
        shutil.rmtree(base)
