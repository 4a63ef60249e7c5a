"""Reward functions: a trajectory in, a scalar out (and its split over turns).

The default is the published recipe's `1[won] - 0.1 * invalid_actions`, where an invalid
action is an unparseable tool call or an action the environment could not execute. The
environment's own score is only logged, never rewarded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentrl.core.types import Trajectory

__all__ = ["RewardFn", "WinMinusInvalid"]


@runtime_checkable
class RewardFn(Protocol):
    """Scores a finished trajectory."""

    def __call__(self, trajectory: Trajectory) -> float:
        """The trajectory's scalar reward."""
        ...

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """The same reward split over turns (sums to `__call__`), for step-level estimators."""
        ...


@dataclass(frozen=True)
class WinMinusInvalid:
    """`win_reward * 1[won] - invalid_penalty * invalid_actions` (default 1.0 and 0.1)."""

    win_reward: float = 1.0
    invalid_penalty: float = 0.1

    def __call__(self, trajectory: Trajectory) -> float:
        """The trajectory's reward."""
        won = self.win_reward if trajectory.won else 0.0
        return won - self.invalid_penalty * trajectory.invalid_actions

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """Invalid-action penalties on the turns that made them, the win bonus on the last turn."""
        rewards = [-self.invalid_penalty if turn.invalid else 0.0 for turn in trajectory.turns]
        if trajectory.won and rewards:
            rewards[-1] += self.win_reward
        return tuple(rewards)
