"""The grader: task registry and grading (`services.grader.tasks`), reward shaping
(`services.grader.rewards`) and the `GraderService` (`services.grader.service`)."""

from services.grader.config import GraderConfig, RewardSettings
from services.grader.rewards import Member, Shaping, group_rewards, valid_rewards

__all__ = ["GraderConfig", "Member", "RewardSettings", "Shaping", "group_rewards", "valid_rewards"]
