"""The learner: GRPO/PPO on a LoRA adapter, one published version per step.

Light to import (no torch, no pydantic until `LearnerConfig` is asked for): the advantage
estimators. The service lives in `services.learner.service` (LearnerService), the step in
`services.learner._trainer`.
"""

from services.learner.advantages import ESTIMATORS, compute, has_signal, signal_share

__all__ = ["ESTIMATORS", "LearnerConfig", "compute", "has_signal", "signal_share"]


def __getattr__(name: str):
    if name == "LearnerConfig":
        from services.learner.config import LearnerConfig

        return LearnerConfig
    raise AttributeError(name)
