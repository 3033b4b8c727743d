"""The learner: GRPO/PPO on a LoRA adapter, one published version per step.

Light to import (no torch, no pydantic until `LearnerConfig` is asked for). The service lives in
`treegrpo_learner.service` (LearnerService), the step in `treegrpo_learner._trainer`;
its advantage estimators are the core's `treegrpo.advantages` (the report uses the same ones).
"""

__all__ = ["LearnerConfig"]


def __getattr__(name: str):
    if name == "LearnerConfig":
        from treegrpo_learner.config import LearnerConfig

        return LearnerConfig
    raise AttributeError(name)
