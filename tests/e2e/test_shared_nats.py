"""Runs that share one `treegrpo nats up` server and one $TREEGRPO_HOME stay apart (real processes):
a run stopped with Ctrl-C stays stopped while two more `treegrpo run` go on at once, and those two
both finish with exactly their own nodes, each group trained once, exports holding only their own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.e2e._harness import ROOT, env_for, export_records, prepare_home, read_log, run_ids, start_run
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
N = 1 * 1 * 3 * 2  # tasks x rounds x expansions x group size (treegrpo/examples/run-small.toml, one round)


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
        stopped = start_run(home, "treegrpo/examples/run-small.toml", *sets, log_path=home / "a.log")
        while not run_ids(home):
            assert stopped.poll() is None, (home / "a.log").read_text()[-3000:]
            time.sleep(0.2)
        (a,) = run_ids(home)
        deadline = time.time() + 300
        while not read_log(home, a, url).node_ids:  # stop it once it has sampled something
            assert time.time() < deadline, (home / "a.log").read_text()[-3000:]
            time.sleep(1.0)
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(120) == 130
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
        assert after.counts[Kind.RUN_ENDED] == 1 and after.counts[Kind.RUN_COMPLETED] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
