"""`treegrpo run --control`: a train arm and its paired no-train control, compared (slow).

The first test checks the pairing's mechanics with the tiny random model (~1 minute on 2 cores):
both arms complete, round 1 is token for token the same in both (the sampler's seeds ignore the
run id), and `treegrpo report TRAIN --control CONTROL --json` carries the documented keys.

The second is issue 12's bar: the demo's settings (treegrpo/examples/demo.toml, the SFT'd demo policy as
`make demo` builds it; chosen by measurement: plant-mini + dogscats-mini, 3 rounds of E2 x G8,
lr 3e-3 with 4 optimizer steps a round, grpo_valid_only) at seed 0 give the verdict `learned`,
with the 95 % interval of the late rounds' (2, 3) sample score difference (train − control) above 0.

Noise, measured on the dev machine on 2026-12-01 (sample score units: a node's mid-rank against
round 1, in [0, 1]; late rounds {2, 3}; runs made before the seeding fix, so the arms were
unpaired, which only widens intervals): two no-train controls against each other (seeds 1 vs 0)
differ by +0.035 [-0.044, +0.124], `no evidence`; these settings' train arms against their
controls: seed 0 +0.212 [+0.121, +0.296], seed 1 +0.177 [+0.092, +0.250], both `learned`. The
smallest learned difference is 5x the control-vs-control difference; its interval clears 0 by 0.09.
Paired runs (token-identical round 1) over three seeds: docs/PERFORMANCE.md, "Defaults that learn". Takes the
SFT warm start (~3.5 min) plus two arms of 96 nodes on 2 idle cores.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e._harness import DEMO_SEED, ROOT, env_for, prepare_home, run_paired
from treegrpo.embedded import EmbeddedNats

pytestmark = [pytest.mark.slow]

SEED = DEMO_SEED  # the seed the experiment was measured at (docstring)
KEYS = ("difference", "ci95", "verdict", "train", "control")


def _report_json(home, train: str, control: str, out) -> dict:
    """The CLI's `--json`, read from the runs' log on a server over their store."""
    server = EmbeddedNats(home / "nats" / "data").start()
    try:
        argv = [
            sys.executable,
            "-m",
            "treegrpo.cli",
            "report",
            train,
            "--control",
            control,
            "--json",
            "--out",
            str(out),
            "--nats",
            server.url,
        ]
        done = subprocess.run(argv, env=env_for(home), cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.timeout(900)
def test_control_arm_repeats_round_one_token_for_token_and_the_report_compares_the_arms(tmp_path):
    home = tmp_path / "home"
    model = prepare_home(home)
    log = run_paired(
        home,
        "treegrpo/examples/run-small.toml",
        f'sampler.model="{model}"',
        'run.run_id="pair"',
        "run.seed=3",
    )
    assert "verdict:" in log and "learning_vs_control.png" in log
    written = json.loads((home / "runs" / "pair" / "report" / "report.json").read_text())
    data = _report_json(home, "pair", "pair-control", tmp_path / "again")
    learning = data["learning"]
    assert learning == written["learning"]  # the runner's comparison is the CLI's
    assert learning["train_run"] == "pair" and learning["control_run"] == "pair-control"
    assert learning["round1"]["identical_share"] == 1.0 and learning["round1"]["ok"] is True
    assert learning["verdict"] in ("learned", "no evidence", "worse")
    assert all(k in learning["pooled"] for k in KEYS) and len(learning["pooled"]["ci95"]) == 2
    assert all(k in learning["tasks"]["spooky-mini"] for k in KEYS)
    assert set(data["curves"]) == {"pair", "pair-control"}
    assert {r["round"] for r in data["curves"]["pair"]["by_round"]} == {1, 2}
    assert (tmp_path / "again" / "learning_curves.png").stat().st_size > 0


@pytest.mark.timeout(2400)
def test_the_demo_settings_learn_at_a_fixed_seed_verdict_learned_with_the_interval_above_zero(demo_pair):
    home, run_id = demo_pair  # demo.toml at SEED with the demo policy: the fixture in conftest.py
    learning = json.loads((home / "runs" / run_id / "report" / "report.json").read_text())["learning"]
    print(json.dumps(learning["pooled"]), json.dumps(learning["round1"]))
    assert learning["round1"]["ok"], learning["round1"]
    assert learning["verdict"] == "learned", learning
    assert learning["pooled"]["ci95"][0] > 0
