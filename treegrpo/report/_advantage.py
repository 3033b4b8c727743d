"""The advantage estimators the report uses are the learner's own (`treegrpo/services/learner/advantages.py`,
pure Python, no torch), so "groups with a learning signal" means exactly what the trainer sees."""

from __future__ import annotations

from treegrpo.services.learner.advantages import ESTIMATORS, compute, has_signal

__all__ = ["ESTIMATORS", "compute", "has_signal"]
