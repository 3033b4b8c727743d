"""The learner: GRPO/PPO on a LoRA adapter, one published version per step.

Light to import (no torch, no pydantic until `LearnerConfig` is asked for): the advantage
estimators. The service lives in `treegrpo.services.learner.service` (LearnerService), the step in
`treegrpo.services.learner._trainer`.
"""

from treegrpo.services.learner.advantages import ESTIMATORS, compute, has_signal, signal_share

__all__ = ["ESTIMATORS", "LearnerConfig", "compute", "has_signal", "signal_share"]


def __getattr__(name: str):
    if name == "LearnerConfig":
        from treegrpo.services.learner.config import LearnerConfig

        return LearnerConfig
    raise AttributeError(name)
