"""The learner: GRPO/PPO on a LoRA adapter, one published version per step.

Light to import (no torch): the advantage estimators and the config. The service lives in
`services.learner.service` (LearnerService), the step in `services.learner._trainer`.
"""

from services.learner.advantages import ESTIMATORS, compute, has_signal, signal_share
from services.learner.config import LearnerConfig

__all__ = ["ESTIMATORS", "LearnerConfig", "compute", "has_signal", "signal_share"]
