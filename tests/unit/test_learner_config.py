"""The learner's config is nested by concern and shares one default per setting with the trainer.

Imports a private module: `treegrpo_learner._config_train`, `treegrpo_learner._settings` (where the
sections and the one default per setting live: what these tests pin).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from treegrpo.config import ConfigError, from_values
from treegrpo_learner import _config_train
from treegrpo_learner import config as learner_config
from treegrpo_learner._settings import SECTIONS, LossSettings, TrainerSettings
from treegrpo_learner.config import MOVED, LearnerConfig

pytestmark = pytest.mark.timeout(30)


def _home(name: str) -> list[str]:
    """Where a TrainerSettings field lives in LearnerConfig: section names (or the top level)."""
    homes = [s for s in SECTIONS if name in LearnerConfig.model_fields[s].annotation.model_fields]
    return homes or ([""] if name in LearnerConfig.model_fields else [])


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(TrainerSettings)])
def test_each_step_setting_lives_in_exactly_one_place_of_the_config_with_the_trainers_default(name):
    (home,) = _home(name)
    section = LearnerConfig.model_fields[home].annotation if home else LearnerConfig
    assert section.model_fields[name].default == getattr(TrainerSettings(), name)


def test_the_config_declares_no_default_of_its_own_for_a_step_setting():
    # a literal default beside the dataclass's would be a second default that could drift from it
    step = {f.name for f in dataclasses.fields(TrainerSettings)}
    homes = {LearnerConfig.model_fields[s].annotation.__name__ for s in SECTIONS} | {"LearnerConfig"}
    checked = set()
    for module in (_config_train, learner_config):
        classes = ast.parse(Path(module.__file__).read_text()).body
        for cls in (c for c in classes if isinstance(c, ast.ClassDef) and c.name in homes):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") in step:
                    default = next(k.value for k in node.value.keywords if k.arg == "default")
                    assert ast.unparse(default) == f"STEP.{node.target.id}", (cls.name, node.target.id)
                    checked.add(node.target.id)
    assert checked == step


def test_the_trainer_reads_each_section_of_a_nested_config():
    cfg = from_values(
        LearnerConfig,
        {
            "optimizer": {"lr": 3e-3, "betas": [0.8, 0.9]},
            "policy_loss": {"kl_coef": 0.05},
            "rollout_correction": {"tis_cap": 0.0},
            "step": {"mini_batches": 4},
            "packing": {"micro_batch_tokens": 4096, "share_prompts": False},
            "dtype": "bfloat16",
        },
    )
    t = TrainerSettings.from_config(cfg)
    assert (t.lr, t.betas, t.kl_coef, t.tis_cap) == (3e-3, (0.8, 0.9), 0.05, 0.0)
    assert (t.mini_batches, t.micro_batch_tokens, t.share_prompts, t.dtype) == (4, 4096, False, "bfloat16")
    assert TrainerSettings.from_config(LearnerConfig()) == TrainerSettings()
    assert LossSettings.of(TrainerSettings()) == LossSettings()


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_flat_key_is_refused_naming_its_new_place(old):
    new = MOVED[old]
    section, key = new.split(".")
    assert key in LearnerConfig.model_fields[section].annotation.model_fields  # the new place exists
    with pytest.raises(ConfigError, match=re.escape(f"learner.{old} is now learner.{new}")):
        from_values(LearnerConfig, {old: 1}, "[learner]")


def test_the_trainer_and_its_settings_import_where_pydantic_is_not_installed():
    # the GPU benchmarks build TrainerSettings on machines without pydantic
    code = (
        "import sys\nsys.modules['pydantic'] = sys.modules['pydantic_settings'] = None\n"
        "from treegrpo_learner._trainer import PolicyTrainer, TrainerSettings\n"
        "assert TrainerSettings(micro_batch_tokens=64).lr == 1e-5\n"
    )
    # importing torch takes ~10 s on a loaded 2-core box
    subprocess.run([sys.executable, "-c", code], check=True, timeout=90)
