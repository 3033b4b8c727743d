"""`treegrpo run --attach`: the services already run elsewhere (compose, Kubernetes); the runner
starts none, publishes `run.started`, follows the run to its end, exports and reports."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e._harness import (
    ROOT,
    env_for,
    export_records,
    prepare_home,
    read_log,
    run_argv,
    run_ids,
    serve_four,
    stop,
)
from treegrpo.embedded import EmbeddedNats
from treegrpo.events import Kind

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_attached_run_drives_services_someone_else_started_to_completion(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    server = EmbeddedNats(tmp_path / "nats").start()
    services = serve_four(home, server.url, model)
    try:
        sets = (f'runner.nats_url="{server.url}"', "runner.timeout_s=420")
        argv = run_argv("treegrpo/examples/run-small.toml", "--attach", sets=sets)
        done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=480)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert all(p.poll() is None for p in services), "a service died during the run"
        (run_id,) = run_ids(home)
        run_dir = home / "runs" / run_id
        assert not (run_dir / "logs").exists()  # the runner started no service of its own
        log = read_log(home, run_id, url=server.url)
        tasks, rounds, e, g = 1, 2, 3, 2
        assert log.counts[Kind.RUN_STARTED] == 1
        assert log.counts[Kind.NODE_SAMPLED] == len(set(log.node_ids)) == tasks * rounds * e * g
        assert log.counts[Kind.NODE_GRADED] == tasks * rounds * e * g
        assert len(log.steps) == rounds and len(set(log.groups_trained)) == len(log.groups_trained)
        assert len(export_records(run_dir / "export")) == tasks * rounds * e * g
        assert (run_dir / "report" / "report.md").exists()
    finally:
        codes = stop(services)
        server.stop()
    assert codes == [0, 0, 0, 0], f"services did not drain on SIGTERM: {codes}"
