"""`treegrpo run --control`: the control arm is the train arm's run file with only training off.

Imports a private module: `treegrpo.runner._control` (what these tests exercise is not on the package's
public surface).
"""

from __future__ import annotations

import pytest

from treegrpo.config import ConfigError
from treegrpo.runner import example, load_run_file
from treegrpo.runner._control import arms

pytestmark = pytest.mark.timeout(30)

DEMO = example("demo")


def test_the_control_differs_from_the_train_arm_only_in_training_and_run_id():
    train, control = arms(
        load_run_file(DEMO, ["run.seed=5", "learner.optimizer.lr=3e-3", 'run.run_id="exp1"'])
    )
    t, c = train.spec(), control.spec()
    assert (t.run_id, c.run_id) == ("exp1", "exp1-control")
    assert t.train and not c.train
    assert t.model_dump(exclude={"run_id", "train"}) == c.model_dump(exclude={"run_id", "train"})
    assert t.seed == 5
    for name in ("sampler", "executor", "grader", "learner"):
        assert train.section(name) == control.section(name)


def test_a_train_arm_without_a_run_id_gets_one_and_its_control_shares_it():
    train, control = arms(load_run_file(DEMO, []))
    assert train.spec().run_id and control.spec().run_id == train.spec().run_id + "-control"


def test_control_of_a_no_train_run_is_refused():
    with pytest.raises(ConfigError, match="train=false"):
        arms(load_run_file(DEMO, ["run.train=false"]))


def test_the_run_commands_flags_are_typed_updates_of_the_run_file_and_resume_keeps_attach():
    from treegrpo.runner.cli import Flags, resume_command

    rf = Flags(train=False, attach=True, max_staleness=2, models="/m/p").apply(load_run_file(DEMO, []))
    spec = rf.spec()
    assert (spec.train, spec.max_staleness, rf.runner.attach) == (False, 2, True)
    assert rf.service("sampler").model == rf.service("learner").model == "/m/p"
    assert rf.section("learner")["model"] == "/m/p"  # it counts as set: the written TOML carries it
    line = resume_command(DEMO, ["run.rounds=2", "learner.optimizer.lr=1e-3"], attach=True)
    assert line.endswith("--resume {run_id} --attach --set learner.optimizer.lr=1e-3")
