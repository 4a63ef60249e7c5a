"""Reward functions: a trajectory in, a scalar out (and its split over turns).

The default is the published recipe's `1[won] - 0.1 * invalid_actions`, where an invalid
action is an unparseable tool call or an action the environment could not execute. The
environment's own score is only logged, never rewarded.

A reward that must wait (an LLM judge) or that compares the K branches of a group (a
RULER-style ranking) is a `GroupReward`: `score_group` gets a group's trajectories at once and
returns one `RewardOutcome` per trajectory, a score or an error. A failed score is recorded as
the trajectory's `reward_error` (left out of its group's statistics, like an `env_error`),
never as 0. `apply_reward` applies either kind; the rollout engine calls it once per group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeAlias, runtime_checkable

from agentrl.core.types import Trajectory

__all__ = [
    "GroupReward",
    "Reward",
    "RewardFn",
    "RewardOutcome",
    "WinMinusInvalid",
    "apply_reward",
    "last_turn_rewards",
]


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


@dataclass(frozen=True)
class RewardOutcome:
    """What a `GroupReward` concluded about one trajectory: a reward, or why there is none."""

    reward: float | None
    """The reward; None exactly when `error` is set."""
    error: str | None = None
    """Why no reward could be computed (the judge failed or its reply had no score)."""
    detail: str | None = None
    """What the reward function said (a judge's reply), kept in the record."""

    def __post_init__(self) -> None:
        if (self.reward is None) == (self.error is None):
            raise ValueError("a RewardOutcome has a reward or an error, not both or neither")


@runtime_checkable
class GroupReward(Protocol):
    """Scores the trajectories of one group at once (asynchronously)."""

    async def score_group(self, trajectories: Sequence[Trajectory]) -> Sequence[RewardOutcome]:
        """One outcome per trajectory, in order."""
        ...

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """The trajectory's (already scored) reward split over turns, for step-level
        estimators; `last_turn_rewards` puts it on the last turn."""
        ...


Reward: TypeAlias = RewardFn | GroupReward
"""Either kind of reward the rollout engine and the trainer take."""


def last_turn_rewards(trajectory: Trajectory) -> tuple[float, ...]:
    """`trajectory.reward` on its last turn, 0 on the others."""
    rewards = [0.0] * len(trajectory.turns)
    if rewards:
        rewards[-1] = trajectory.reward
    return tuple(rewards)


async def apply_reward(
    reward: Reward, trajectories: Sequence[Trajectory]
) -> tuple[Trajectory, ...]:
    """`trajectories` with their rewards set: by `reward(t)` for a `RewardFn`, by one
    `score_group` call for a `GroupReward` (its errors become `reward_error`, reward 0)."""
    if not isinstance(reward, GroupReward):
        return tuple(replace(t, reward=float(reward(t))) for t in trajectories)
    outcomes = list(await reward.score_group(trajectories))
    if len(outcomes) != len(trajectories):
        raise ValueError(
            f"{type(reward).__name__}.score_group returned {len(outcomes)} outcomes for "
            f"{len(trajectories)} trajectories"
        )
    return tuple(
        replace(
            t,
            reward=0.0 if o.reward is None else float(o.reward),
            reward_error=o.error,
            reward_detail=o.detail,
        )
        for t, o in zip(trajectories, outcomes, strict=True)
    )
