"""The learner's faults through `treegrpo run` (real processes, faults injected from outside): the
only checkpoint damaged or gone and the learner killed, the run finishes by itself and the screen
says what was lost; a step that overflows stops the run at once with the step and the cause."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e._harness import ROOT, env_for, prepare_home, read_log, run_argv, run_ids, start_run
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
CONFIG = "treegrpo/examples/run-small.toml"  # one task, 3 groups a round: one learner step a round


def truncate(ckpt: Path) -> None:
    f = ckpt / "trainer.pt"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def garbage_under_the_header(ckpt: Path) -> None:
    f = ckpt / "adapter" / "adapter_model.safetensors"
    data = bytearray(f.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    data[header:] = bytes((i * 37 + 11) % 251 for i in range(len(data) - header))
    f.write_bytes(bytes(data))


def delete_folder(ckpt: Path) -> None:
    shutil.rmtree(ckpt.parent)


def wait_for_step(home: Path, proc: subprocess.Popen, step: int, timeout: float = 300) -> str:
    """The run id once the learner logged step `step` and wrote its checkpoint (in the background,
    after the version's load: the learner idles then until the next round)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        runs = run_ids(home)
        log = home / "runs" / runs[0] / "logs" / "learner.log" if runs else None
        text = log.read_text(errors="replace") if log and log.exists() else ""
        if f"step {step}: " in text and f"checkpoint of step {step} written in " in text:
            return runs[0]
        time.sleep(0.2)
    raise AssertionError(f"no learner step {step}: {(home / 'run.log').read_text()[-3000:]}")


@pytest.mark.parametrize(
    ("damage", "after"),
    [(truncate, 1), (garbage_under_the_header, 3), (delete_folder, 2)],
    ids=["only-checkpoint-truncated-after-step-1", "garbage-under-header-after-step-3", "folder-deleted"],
)
def test_a_run_whose_learner_lost_its_only_checkpoint_finishes_and_says_what_was_lost(
    tmp_path, damage, after
):
    home = tmp_path / "home"
    model = prepare_home(home)
    rounds = after + 1
    proc = start_run(
        home,
        CONFIG,
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        f"run.rounds={rounds}",
        "learner.checkpoint.keep=1",
        "runner.timeout_s=500",
    )
    try:
        run_id = wait_for_step(home, proc, after)
        ckpt = home / "learner" / run_id / f"step_{after:06d}"
        damage(ckpt)
        learner = json.loads((home / "runs" / run_id / "pids.json").read_text())["learner"]
        os.kill(learner, signal.SIGKILL)
        killed = time.monotonic()
        while "learner restored version" not in (home / "run.log").read_text() and proc.poll() is None:
            time.sleep(0.2)
        shown = time.monotonic() - killed
        assert proc.wait(500) == 0, (home / "run.log").read_text()[-6000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    screen = " ".join((home / "run.log").read_text().split())  # rich wraps long lines off a terminal
    assert f"learner restored version {after} from published adapter v{after}" in screen, screen[-4000:]
    assert f"lost: optimizer state (AdamW moments, RNG): reset at version {after}" in screen
    if damage is not delete_folder:
        assert f"skipped: step_{after:06d}:" in screen
    print(
        f"on screen {shown:.1f}s after the kill, the run finished {time.monotonic() - killed:.0f}s after it"
    )
    print(next(ln for ln in (home / "run.log").read_text().splitlines() if "learner restored" in ln))
    log = read_log(home, run_id)
    assert [s.step for s in log.steps] == list(range(1, rounds + 1))  # no gap, no repeat
    assert len(log.groups_trained) == len(set(log.groups_trained)) == rounds * 3
    assert log.counts[Kind.POLICY_PUBLISHED] == rounds and log.counts[Kind.LEARNER_RESTORED] == 1


def test_an_overflowing_step_stops_the_run_at_once_with_the_step_and_the_cause_on_screen(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    # the tiny random model earns no reward signal; a KL term makes every step update the adapter
    sets = (
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        "learner.optimizer.lr=1e39",
        "learner.policy_loss.kl_coef=0.01",
        "runner.timeout_s=400",
    )
    started = time.monotonic()
    done = subprocess.run(
        run_argv(CONFIG, sets=sets), env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=450
    )
    took = time.monotonic() - started
    screen = " ".join((done.stdout + done.stderr).split())  # rich wraps long lines off a terminal
    assert done.returncode == 1, screen[-3000:]
    assert "learner failed permanently: step 1 overflowed (RuntimeError: value cannot be converted" in screen
    assert "check learner.optimizer.lr" in screen
    assert took < 200, f"took {took:.0f}s"  # the first step's time, not runner.timeout_s (400 s)
    print(f"run stopped {took:.0f}s after its start")
    (run_id,) = run_ids(home)
    assert (home / "runs" / run_id / "logs" / "learner.log").read_text().count("==== start") == 1
    log = read_log(home, run_id)
    assert log.counts[Kind.LEARNER_STEPPED] == 0 and log.counts[Kind.POLICY_PUBLISHED] == 0
