"""The grader: task registry and grading (`treegrpo.tasks`), reward shaping
(`treegrpo.services.grader.rewards`) and the `GraderService` (`treegrpo.services.grader.service`)."""

from treegrpo.services.grader.config import GraderConfig, RewardSettings
from treegrpo.services.grader.rewards import Member, Shaping, group_rewards, valid_rewards

__all__ = ["GraderConfig", "Member", "RewardSettings", "Shaping", "group_rewards", "valid_rewards"]
