"""When the bus stops taking writes (real processes, a real full disk, a real NATS that is gone):
the screen names the fault within seconds; once space returns the run goes on by itself; if it does
not (or NATS stays gone), the run stops after `runner.bus_wait_s` with one line naming the cause and
the `--resume` command, never a traceback; that command then finishes the run with nothing lost or
duplicated.

The full disk is a real one: $TREEGRPO_HOME on a small tmpfs, filled with a ballast file after the
first learner step. nats-server then fails its writes as on any full disk ("Critical write error ...
no space left on device"), with no error ack (publishes time out) and a stream that stays failing
after space returns until the server restarts; the learner's checkpoints, the services' logs and
heartbeats hit the same full disk. (A JetStream `max_file_store` limit would answer with error acks
and recover by itself: not what a full disk does.) Mounting a tmpfs needs root.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e._harness import ROOT, env_for, home_processes, prepare_home, read_log, start_run
from treegrpo import events
from treegrpo.bus import STREAM, Bus
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
RUN_SMALL = "treegrpo/examples/run-small.toml"
ROUNDS = 3
RESUME = re.compile(r"then resume with: (treegrpo run .*--resume \S+.*)$", re.M)
RUN_ID = re.compile(r"run (\d{8}_\d{6}_[0-9a-f]{6})")


@contextlib.contextmanager
def small_disk(path: Path, size_mb: int):
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs mount (root); no other way fails writes the same way")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        for pid in home_processes(path):  # a failing test must not leave processes on the mount
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        kept = path.parent / "home-logs"  # what the services and the keeper said, for a failure's reader
        for log in [*path.glob("runs/*/logs/*.log"), *path.glob("nats/*.log"), *path.glob("nats/data/*.log")]:
            with contextlib.suppress(OSError):
                (kept / log.relative_to(path)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(log, kept / log.relative_to(path))
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """Take every free byte of the disk under `folder`."""
    ballast = folder / "ballast"
    with open(ballast, "wb", buffering=0) as fh:  # unbuffered: nothing left to flush at close
        for size in (1 << 20, 4096):
            with contextlib.suppress(OSError):
                while fh.write(b"\0" * size):
                    pass
    return ballast


def count(url: str, run_id: str, kind: str) -> int:
    async def go() -> int:
        bus = await Bus.connect(url, "test/count", 5)
        try:
            info = await bus.js.stream_info(STREAM, subjects_filter=events.subject_filter(kind, run_id))
            return sum((info.state.subjects or {}).values())
        finally:
            await bus.close(1)

    try:
        return asyncio.run(go())
    except Exception:  # the server may be restarting: ask again
        return 0


def wait_for(pred, timeout: float, proc: subprocess.Popen | None = None, what: str = "") -> float:
    started = time.monotonic()
    while not pred():
        assert time.monotonic() - started < timeout, f"no {what} within {timeout:.0f}s"
        assert proc is None or proc.poll() is None, f"the run exited ({proc.returncode}) before {what}"
        time.sleep(0.25)
    return time.monotonic() - started


def screen(home: Path) -> str:
    """What the runner printed: a terminal is not on the full disk, so neither is this file."""
    return (home.parent / "screen.log").read_text(errors="replace")


def run_id_of(home: Path) -> str:
    return RUN_ID.search(screen(home)).group(1)


def sets(model: Path, *more: str) -> list[str]:
    return [f'sampler.model="{model}"', f'learner.model="{model}"', f"run.rounds={ROUNDS}", *more]


def check_complete(home: Path, run_id: str, url: str = "") -> None:
    log = read_log(home, run_id, url)
    n = ROUNDS * 3 * 2
    assert log.counts[Kind.NODE_SAMPLED] == n == len(set(log.node_ids)), log.counts
    assert log.counts[Kind.NODE_GRADED] == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == 3 * ROUNDS
    assert sorted(log.groups_trained) == sorted(log.groups_scored)  # each trained once
    assert log.counts[Kind.RUN_COMPLETED] == 1


def resume(home: Path, text: str, log_name: str) -> int:
    """Run the `--resume` command the screen printed, as printed."""
    (cmd,) = RESUME.findall(text)
    argv = [sys.executable, "-m", "treegrpo.cli", *shlex.split(cmd)[1:]]
    with open(home.parent / log_name, "wb") as out:
        return subprocess.run(
            argv, env=env_for(home), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def fill_after_first_step(home: Path, proc: subprocess.Popen) -> tuple[Path, float]:
    """Fill the disk once the learner stepped; then how long until the screen says so."""
    wait_for(lambda: (home / "nats" / "url").exists() and RUN_ID.search(screen(home)), 120, proc, "run")
    url, run_id = (home / "nats" / "url").read_text().strip(), run_id_of(home)
    wait_for(lambda: count(url, run_id, Kind.LEARNER_STEPPED) >= 1, 300, proc, "learner step")
    ballast = fill(home)
    named = wait_for(lambda: "disk full" in screen(home), 60, proc, "'disk full' on screen")
    return ballast, named


def test_a_full_disk_freed_again_lets_the_run_go_on_by_itself(tmp_path):
    with small_disk(tmp_path / "home", 160) as home:
        model = prepare_home(home)
        proc = start_run(
            home,
            RUN_SMALL,
            *sets(model, "runner.bus_wait_s=300", "runner.timeout_s=420"),
            log_path=home.parent / "screen.log",
        )
        ballast, named = fill_after_first_step(home, proc)
        time.sleep(10)  # full for a while: every service meets it
        ballast.unlink()
        freed = time.monotonic()
        assert proc.wait(400) == 0, screen(home)[-5000:]
        text = screen(home)
        assert "Traceback" not in text
        line = next(ln for ln in text.splitlines() if "disk full" in ln)
        assert "free space on that disk" in line and str(home / "nats" / "data") in line
        assert "cleared: disk full" in text
        done = time.monotonic() - freed
        print(f"'disk full' on screen {named:.1f}s after the fill; run done {done:.0f}s after freeing")
        check_complete(home, run_id_of(home))


def test_a_full_disk_not_freed_stops_the_run_with_one_line_and_resume_finishes_it(tmp_path):
    with small_disk(tmp_path / "home", 160) as home:
        model = prepare_home(home)
        proc = start_run(
            home,
            RUN_SMALL,
            *sets(model, "runner.bus_wait_s=20", "runner.timeout_s=600"),
            log_path=home.parent / "screen.log",
        )
        ballast, named = fill_after_first_step(home, proc)
        filled = time.monotonic()
        health = subprocess.run(  # what `treegrpo health` says meanwhile, from outside the run
            [sys.executable, "-m", "treegrpo.cli", "health"], env=env_for(home), cwd=ROOT, capture_output=True
        )
        said = health.stdout.decode().replace("\n", "")
        assert (
            health.returncode == 1 and f"unhealthy: disk full: NATS cannot store events under {home}" in said
        )
        assert proc.wait(120) == 1
        stopped = time.monotonic() - filled
        text = screen(home)
        assert "Traceback" not in text and stopped < 20 + 40, text[-3000:]
        (last,) = [ln for ln in text.splitlines() if "stopped:" in ln]
        assert "disk full" in last and "free space on that disk" in last and "--resume" in last
        print(f"'disk full' on screen {named:.1f}s after the fill; run stopped {stopped:.0f}s after")
        ballast.unlink()
        assert resume(home, text, "resume.log") == 0, (home.parent / "resume.log").read_text()[-5000:]
        check_complete(home, run_id_of(home))


def test_nats_gone_for_good_stops_the_run_with_one_line_and_resume_finishes_it(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    server = EmbeddedNats(tmp_path / "nats").start()  # a NATS of its own (compose, a cluster)
    try:
        more = (f'runner.nats_url="{server.url}"', "runner.bus_wait_s=20", "runner.timeout_s=600")
        proc = start_run(home, RUN_SMALL, *sets(model, *more), log_path=home.parent / "screen.log")
        wait_for(lambda: RUN_ID.search(screen(home)), 120, proc, "run")
        run_id = run_id_of(home)
        wait_for(lambda: count(server.url, run_id, Kind.LEARNER_STEPPED) >= 1, 300, proc, "learner step")
        server.kill()  # SIGKILL, and nobody starts it again
        killed = time.monotonic()
        named = wait_for(lambda: "is unreachable" in screen(home), 60, proc, "'unreachable' on screen")
        assert proc.wait(120) == 1
        stopped = time.monotonic() - killed
        text = screen(home)
        assert "Traceback" not in text and stopped < 20 + 40, text[-3000:]
        (last,) = [ln for ln in text.splitlines() if "stopped:" in ln]
        assert f"NATS at {server.url} is unreachable" in last and "--resume" in last
        print(f"'unreachable' on screen {named:.1f}s after the kill; run stopped {stopped:.0f}s after")
        server.start()  # back, same port and store
        assert resume(home, text, "resume.log") == 0, (home.parent / "resume.log").read_text()[-5000:]
        check_complete(home, run_id, server.url)
    finally:
        server.stop()
