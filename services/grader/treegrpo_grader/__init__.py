"""The grader: task registry and grading (`treegrpo.tasks`), reward shaping
(`treegrpo_grader.rewards`) and the `GraderService` (`treegrpo_grader.service`)."""

from treegrpo_grader.config import GraderConfig, RewardSettings
from treegrpo_grader.rewards import Member, Shaping, group_rewards, valid_rewards

__all__ = ["GraderConfig", "Member", "RewardSettings", "Shaping", "group_rewards", "valid_rewards"]
