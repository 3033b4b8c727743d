"""Load through one deployment, short (issue 32, item 2; benchmarks/load_soak.py is the long form):
the four services started apart on one nats-server, the sampler on the replay backend handing out
tiny real scripts, two `treegrpo run --attach` at once of 40 nodes each (one round, E4 × G10,
training off). Every node of both runs is sampled, executed and graded exactly once, nodes flow
(nodes/s > 0), each service's memory stays within a bound over the runs, the services drain, and
the export of a run has every node.

Imports a private module: `benchmarks._load_parts` (through benchmarks/load_soak.py).
"""

from __future__ import annotations

import pytest

from benchmarks.load_soak import deployed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RUNS, NODES = 2, 40
MEMORY_EVERY_S = 0.5  # the two runs take 8–20 s on 2 cores: every 2 s gave as few as 3 samples
GROWTH_BOUND_MB = 150  # first quarter → last quarter of the runs, per service: a leak of a few KB a
# node does not show in 80 nodes, a whole run held per node (hundreds of MB) does


def test_two_concurrent_runs_through_one_deployment_grade_every_node_once_within_a_memory_bound(tmp_path):
    result = deployed(
        tmp_path,
        RUNS,
        NODES,
        train=False,
        concurrency=2,
        shape=(4, 10),
        report=False,
        memory_every_s=MEMORY_EVERY_S,
    )
    assert result["runner_exits"] == [0], result
    assert result["services_alive"] == [True] * 4 and result["service_exit_codes"] == [0] * 4, result
    assert result["nodes_graded"] == RUNS * NODES and result["every_node_once"], result
    assert result["nodes_per_s"] > 0, result
    assert 0 < result["sampled_to_graded_p50_s"] <= result["sampled_to_graded_p99_s"], result
    assert result["memory_samples"] >= 4, result
    for name, mem in result["memory"].items():
        assert mem["last_quarter_mb"] - mem["first_quarter_mb"] < GROWTH_BOUND_MB, (name, mem)
    assert result["export_report_one_run"]["nodes"] == NODES, result
    assert result["stream_bytes_per_node"] > 0, result
