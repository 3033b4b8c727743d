"""Runs that share one `treegrpo nats up` server and one $TREEGRPO_HOME stay apart (real processes):
a run stopped with Ctrl-C stays stopped while two more `treegrpo run` go on at once, and those two
both finish with exactly their own nodes, each group trained once, exports holding only their own.
Without `nats up`, runs on one fresh home share the embedded server the first one started: it stays
up while any run uses it, goes away after the last whichever started it, and two runs started in
the same second start one server."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e._harness import (
    ROOT,
    env_for,
    export_records,
    home_processes,
    pid_running,
    prepare_home,
    read_log,
    run_ids,
    start_run,
)
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
N = 1 * 1 * 3 * 2  # tasks x rounds x expansions x group size (treegrpo/examples/run-small.toml, one round)
RUN_SMALL = "treegrpo/examples/run-small.toml"


def nats_up(home) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "treegrpo.cli", "nats", "up", "--port", "0"],
        env=env_for(home),
        cwd=ROOT,
        stdout=open(home / "nats.log", "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url_file = home / "nats" / "url"
    deadline = time.time() + 60
    while not (url_file.exists() and url_file.read_text().strip()):
        assert time.time() < deadline and proc.poll() is None, (home / "nats.log").read_text()
        time.sleep(0.2)
    return proc, url_file.read_text().strip()


def test_runs_on_one_nats_server_never_take_each_others_work(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    server, url = nats_up(home)
    sets = [f'sampler.model="{model}"', f'learner.model="{model}"', "run.rounds=1", "runner.timeout_s=700"]
    try:
        # far more rounds than it will get to: it must still be running when it is stopped (a
        # one-round run on this model can complete in under 10 s, before the first poll sees it)
        long = [*sets[:2], "run.rounds=50", sets[3]]
        stopped = start_run(home, "treegrpo/examples/run-small.toml", *long, log_path=home / "a.log")
        while not run_ids(home):
            assert stopped.poll() is None, (home / "a.log").read_text()[-3000:]
            time.sleep(0.2)
        (a,) = run_ids(home)
        deadline = time.time() + 300
        while not read_log(home, a, url).node_ids:  # stop it once it has sampled something
            assert time.time() < deadline, (home / "a.log").read_text()[-3000:]
            time.sleep(1.0)
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(120) == 130, (home / "a.log").read_text()[-3000:]
        sampled_a = read_log(home, a, url).counts[Kind.NODE_SAMPLED]

        both = [
            start_run(home, "treegrpo/examples/run-small.toml", *sets, log_path=home / f"{n}.log")
            for n in "bc"
        ]
        codes = [p.wait(900) for p in both]
        logs = {n: (home / f"{n}.log").read_text() for n in "bc"}
        assert codes == [0, 0], {n: text[-3000:] for n, text in logs.items()}

        others = [r for r in run_ids(home) if r != a]
        assert len(others) == 2
        for run in others:
            log = read_log(home, run, url)
            assert log.counts[Kind.NODE_SAMPLED] == N == len(set(log.node_ids))
            assert len(log.groups_scored) == len(set(log.groups_scored)) == 3
            assert sorted(log.groups_trained) == sorted(log.groups_scored)  # each once
            assert log.counts[Kind.RUN_ENDED] == 1 and log.counts[Kind.RUN_COMPLETED] == 1
            exported = [r["id"] for r in export_records(home / "runs" / run / "export")]
            assert sorted(exported) == sorted(log.node_ids)  # its own nodes, all of them, nothing else
        after = read_log(home, a, url)
        assert after.counts[Kind.NODE_SAMPLED] == sampled_a  # the stopped run was not picked up again
        ended = after.counts[Kind.RUN_ENDED], after.counts[Kind.RUN_COMPLETED]
        assert ended == (1, 0), (home / "a.log").read_text()[-3000:]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


# ---- one embedded server per home, shared by the runs on it (issue 25) ---------------------------
RUN_ID = re.compile(r"run (\d{8}_\d{6}_[0-9a-f]{6})")


def _sets(model, rounds: int) -> list[str]:
    return [
        f'sampler.model="{model}"',
        f'learner.model="{model}"',
        f"run.rounds={rounds}",
        "runner.timeout_s=420",
    ]


def health_of(home) -> str:
    argv = [sys.executable, "-m", "treegrpo.cli", "health"]
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def _run_id_of(log_path) -> str:
    found = RUN_ID.search(log_path.read_text())
    assert found, log_path.read_text()[-3000:]
    return found.group(1)


def _note_servers(home, seen: set[int]) -> None:
    """The nats-server and keeper pids of this home, as they come and go."""
    f = home / "nats" / "data" / "nats-server.pid"
    with contextlib.suppress(OSError, ValueError):
        seen.add(int(f.read_text().strip()))
    with contextlib.suppress(OSError, ValueError):
        seen.add(json.loads((home / "nats" / "keeper.json").read_text())["pid"])


def _check_complete(home, run_id: str, rounds: int) -> None:
    """Exactly the run's nodes, each group scored and trained once, its own export: nothing lost,
    nothing duplicated, nothing of another run."""
    log = read_log(home, run_id)  # from the store, on a server of the test's own (every run ended)
    n = rounds * 3 * 2  # rounds x expansions x group size (one task)
    assert log.counts[Kind.NODE_SAMPLED] == n == len(set(log.node_ids)), log.counts
    assert log.counts[Kind.NODE_GRADED] == n
    assert len(log.groups_scored) == len(set(log.groups_scored)) == 3 * rounds
    assert sorted(log.groups_trained) == sorted(log.groups_scored)
    assert log.counts[Kind.RUN_COMPLETED] == 1
    exported = [r["id"] for r in export_records(home / "runs" / run_id / "export")]
    assert sorted(exported) == sorted(log.node_ids)


def test_two_runs_a_few_seconds_apart_share_one_embedded_server_that_goes_away_after_the_last(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)  # a fresh home: no `treegrpo nats up`, the runs' default NATS
    seen: set[int] = set()
    short = start_run(home, RUN_SMALL, *_sets(model, 1), log_path=home / "a.log")
    time.sleep(4)
    long = start_run(home, RUN_SMALL, *_sets(model, 3), log_path=home / "b.log")
    while not RUN_ID.search((home / "b.log").read_text()) and short.poll() is None:
        time.sleep(0.2)
    health = health_of(home)  # `treegrpo health` names who shares the server
    assert f"in use by: treegrpo run {_run_id_of(home / 'a.log')}" in health.replace("\n", "")
    assert f"treegrpo run {_run_id_of(home / 'b.log')}" in health.replace("\n", "")
    while short.poll() is None:
        _note_servers(home, seen)
        time.sleep(0.2)
    assert short.returncode == 0, (home / "a.log").read_text()[-3000:]
    assert long.poll() is None  # the run that started the server ended first; the other goes on
    while long.poll() is None:
        _note_servers(home, seen)
        time.sleep(0.2)
    assert long.returncode == 0, (home / "b.log").read_text()[-5000:]
    assert seen and not [pid for pid in seen if pid_running(pid)]  # by PID: no nats-server, no keeper
    assert home_processes(home) == {}  # nor any other process of this home
    starts = (home / "nats" / "data" / "nats-server.log").read_text().count("Starting nats-server")
    assert starts == 1  # the second run attached to the first one's server
    _check_complete(home, _run_id_of(home / "a.log"), 1)
    _check_complete(home, _run_id_of(home / "b.log"), 3)


def test_two_runs_started_in_the_same_second_start_one_server(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    rounds = {"a": 1, "b": 2}  # whichever started the server, the shorter one must not take it away
    runs = {
        n: start_run(home, RUN_SMALL, *_sets(model, r), log_path=home / f"{n}.log") for n, r in rounds.items()
    }
    codes = {n: p.wait(600) for n, p in runs.items()}
    assert codes == {"a": 0, "b": 0}, {n: (home / f"{n}.log").read_text()[-3000:] for n in "ab"}
    assert (home / "nats" / "data" / "nats-server.log").read_text().count("Starting nats-server") == 1
    assert home_processes(home) == {}
    for n, r in rounds.items():
        _check_complete(home, _run_id_of(home / f"{n}.log"), r)
    # a report of an ended run reads the log through the same server, up only while it reads
    argv = [
        sys.executable,
        "-m",
        "treegrpo.cli",
        "report",
        _run_id_of(home / "a.log"),
        "--out",
        str(tmp_path / "rep"),
    ]
    done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and (tmp_path / "rep" / "report.md").exists(), done.stdout + done.stderr
    assert home_processes(home) == {}
