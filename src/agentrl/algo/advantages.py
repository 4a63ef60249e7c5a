"""Advantage estimators: the only place advantages are computed.

An estimator takes the trajectory groups of one update (each group: the K trajectories of one
game from the same initial state) and returns an advantage for every assistant turn of every
trajectory. Trajectory-level estimators broadcast one value to all turns of a trajectory.

Conventions shared by every estimator here:
- trajectories that ended in an infrastructure error (`sampler_error`, `env_error`) or whose
  reward could not be computed (`reward_error`: a judge failed) are left out of their group's
  statistics and get advantage 0: a crash is not evidence about the policy;
- a group whose (remaining) rewards are all equal is *degenerate*: every advantage is 0 and
  the group is counted so the trainer can skip it and report it.

Every estimator here is *group-local* (`group_local = True`): a group's advantages depend on
that group only, so estimating one group at a time gives what estimating the batch gives. The
trainer relies on it to stream groups to training as they finish (`--stream-groups`); an
estimator that normalises over the whole batch declares `group_local = False`.

`score_groups` is the one call that turns played groups into `ScoredGroup`s (each group with
its advantages and degenerate flag): the training pipeline calls it once per group (group-local
estimators) or once per final batch (others), and everything downstream reuses its answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from agentrl.algo.rewards import Reward, WinMinusInvalid
from agentrl.core.types import Trajectory, TrajectoryGroup

__all__ = [
    "AdvantageEstimator",
    "Advantages",
    "GiGPO",
    "GroupAdvantages",
    "GroupMean",
    "GroupNormalized",
    "LeaveOneOut",
    "ScoredGroup",
    "TrajectoryLevelEstimator",
    "advantages_of",
    "is_group_local",
    "score_groups",
]

FloatArray = npt.NDArray[np.float64]

DEGENERATE_TOLERANCE = 1e-9
"""Rewards closer than this are considered equal when detecting degenerate groups."""


@dataclass(frozen=True)
class GroupAdvantages:
    """Advantages of one group: `per_turn[i][t]` is trajectory i's advantage at turn t."""

    per_turn: tuple[tuple[float, ...], ...]
    degenerate: bool

    def is_zero(self, index: int) -> bool:
        """True when every turn of trajectory `index` has advantage exactly 0."""
        return all(a == 0.0 for a in self.per_turn[index])


@dataclass(frozen=True)
class Advantages:
    """The estimator's answer for one update, aligned with the groups it was given."""

    groups: tuple[GroupAdvantages, ...]

    @property
    def degenerate_groups(self) -> int:
        """How many groups had all-equal rewards (no learning signal)."""
        return sum(1 for g in self.groups if g.degenerate)

    def for_trajectory(self, group_index: int, trajectory_index: int) -> tuple[float, ...]:
        """Per-turn advantages of one trajectory."""
        return self.groups[group_index].per_turn[trajectory_index]


@runtime_checkable
class AdvantageEstimator(Protocol):
    """Turns groups of scored trajectories into per-turn advantages."""

    @property
    def group_local(self) -> bool:
        """True when a group's advantages depend on that group only (estimating one group at a
        time gives what estimating the batch gives); False when they may depend on the batch."""
        ...

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        """Advantages for every assistant turn of every trajectory, group by group."""
        ...


def is_group_local(estimator: AdvantageEstimator) -> bool:
    """Whether `estimator` declares `group_local = True`; an object that does not implement
    the protocol's `group_local` member is not an `AdvantageEstimator` and is not group-local."""
    return isinstance(estimator, AdvantageEstimator) and estimator.group_local is True


@dataclass(frozen=True, eq=False)
class ScoredGroup:
    """One played group with its advantages: what the pipeline hands the trainer."""

    group: TrajectoryGroup
    advantages: GroupAdvantages

    @property
    def degenerate(self) -> bool:
        """All rewards equal (no learning signal)."""
        return self.advantages.degenerate


def score_groups(
    estimator: AdvantageEstimator, groups: Sequence[TrajectoryGroup]
) -> tuple[ScoredGroup, ...]:
    """ONE `estimator.estimate(groups)`, checked finite, paired group by group."""
    if not groups:
        return ()
    answer = estimator.estimate(groups)
    check_finite(answer)
    return tuple(ScoredGroup(g, a) for g, a in zip(groups, answer.groups, strict=True))


def advantages_of(scored: Sequence[ScoredGroup]) -> Advantages:
    """The `Advantages` of scored groups, in their order."""
    return Advantages(tuple(s.advantages for s in scored))


def usable(trajectory: Trajectory) -> bool:
    """Whether a trajectory takes part in its group's statistics (not an infra error, a
    reward was computed; `Trajectory.usable`)."""
    return trajectory.usable


class TrajectoryLevelEstimator:
    """Base for estimators that give one advantage per trajectory, broadcast to its turns.

    Subclasses implement `centered(rewards)`, called only on non-degenerate groups with at
    least one usable trajectory.
    """

    group_local: ClassVar[bool] = True
    """Each group's advantages come from its own rewards only."""

    def centered(self, rewards: FloatArray) -> FloatArray:
        """Advantages of the usable trajectories of one group, given their rewards."""
        raise NotImplementedError

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        """Advantages for every turn of every trajectory, group by group."""
        return Advantages(groups=tuple(self._group(g) for g in groups))

    def _group(self, group: TrajectoryGroup) -> GroupAdvantages:
        keep = [i for i, t in enumerate(group.trajectories) if usable(t)]
        rewards = np.array([group.trajectories[i].reward for i in keep], dtype=np.float64)
        values = [0.0] * len(group.trajectories)
        degenerate = rewards.size == 0 or float(np.ptp(rewards)) <= DEGENERATE_TOLERANCE
        if not degenerate:
            for i, value in zip(keep, self.centered(rewards), strict=True):
                values[i] = float(value)
        per_turn = tuple((values[i],) * len(t.turns) for i, t in enumerate(group.trajectories))
        return GroupAdvantages(per_turn=per_turn, degenerate=degenerate)


@dataclass(frozen=True)
class GroupMean(TrajectoryLevelEstimator):
    """`reward - mean(group rewards)`, no std division (the published recipe's default)."""

    def centered(self, rewards: FloatArray) -> FloatArray:
        """Reward minus the group mean."""
        centered: FloatArray = rewards - rewards.mean()
        return centered


@dataclass(frozen=True)
class GroupNormalized(TrajectoryLevelEstimator):
    """GRPO: `(reward - mean) / (std + eps)` with the population std (ddof=0) by default."""

    eps: float = 1e-6
    ddof: int = 0

    def centered(self, rewards: FloatArray) -> FloatArray:
        """Reward minus the group mean, divided by the group std plus eps."""
        if rewards.size <= self.ddof:
            return np.zeros_like(rewards)
        std = float(rewards.std(ddof=self.ddof))
        scaled: FloatArray = (rewards - rewards.mean()) / (std + self.eps)
        return scaled


@dataclass(frozen=True)
class LeaveOneOut(TrajectoryLevelEstimator):
    """RLOO: `reward_i - mean(rewards of the other trajectories of the group)`."""

    def centered(self, rewards: FloatArray) -> FloatArray:
        """Reward minus the mean of the others (0 for a group of one)."""
        k = rewards.size
        if k < 2:
            return np.zeros_like(rewards)
        baseline = (rewards.sum() - rewards) / (k - 1)
        centered: FloatArray = rewards - baseline
        return centered


@dataclass(frozen=True)
class GiGPO:
    """Group-in-group credit (Feng et al., 2025): episode advantage + omega * step advantage.

    The episode advantage comes from a trajectory-level estimator over the group (default
    `GroupMean`). Turns of the group that acted from the same environment state
    (`Turn.state_key`) form an *anchor-state group*; each turn's step return is its
    discounted future reward `sum_k gamma^k r_{t+k}` (per-turn rewards from
    `reward_fn.turn_rewards`); the step advantage is that return minus its anchor group's mean
    (divided by the group's std + eps when `normalize_step`). Turns without a state key or
    alone in their anchor group get step advantage 0. A group is degenerate only when every
    resulting advantage is 0.
    """

    group_local: ClassVar[bool] = True
    """Anchor-state groups are formed inside one game's group, never across games."""

    gamma: float = 0.95
    omega: float = 1.0
    normalize_step: bool = False
    eps: float = 1e-6
    episode: TrajectoryLevelEstimator = field(default_factory=lambda: GroupMean())
    reward_fn: Reward = field(default_factory=WinMinusInvalid)

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        """Per-turn advantages for every trajectory of every group."""
        episode = self.episode.estimate(groups)
        return Advantages(
            groups=tuple(self._group(g, e) for g, e in zip(groups, episode.groups, strict=True))
        )

    def step_returns(self, trajectory: Trajectory) -> tuple[float, ...]:
        """Discounted future reward of each turn of one trajectory."""
        rewards = self.reward_fn.turn_rewards(trajectory)
        returns = [0.0] * len(rewards)
        running = 0.0
        for t in range(len(rewards) - 1, -1, -1):
            running = rewards[t] + self.gamma * running
            returns[t] = running
        return tuple(returns)

    def _group(self, group: TrajectoryGroup, episode: GroupAdvantages) -> GroupAdvantages:
        anchors: dict[str, list[tuple[int, int, float]]] = {}
        for i, trajectory in enumerate(group.trajectories):
            if not usable(trajectory):
                continue
            for t, (turn, ret) in enumerate(
                zip(trajectory.turns, self.step_returns(trajectory), strict=True)
            ):
                if turn.state_key is not None:
                    anchors.setdefault(turn.state_key, []).append((i, t, ret))
        step = [[0.0] * len(t.turns) for t in group.trajectories]
        for members in anchors.values():
            if len(members) < 2:
                continue
            returns = np.array([ret for _, _, ret in members], dtype=np.float64)
            centered = returns - returns.mean()
            if self.normalize_step:
                centered = centered / (float(returns.std()) + self.eps)
            for (i, t, _), value in zip(members, centered, strict=True):
                step[i][t] = 0.0 if abs(value) <= DEGENERATE_TOLERANCE else float(value)
        per_turn = tuple(
            tuple(e + self.omega * s for e, s in zip(ep_row, step_row, strict=True))
            for ep_row, step_row in zip(episode.per_turn, step, strict=True)
        )
        degenerate = all(a == 0.0 for row in per_turn for a in row)
        return GroupAdvantages(per_turn=per_turn, degenerate=degenerate)


def check_finite(advantages: Advantages) -> None:
    """Raise ValueError if any advantage is NaN or infinite (a bug upstream)."""
    for g, group in enumerate(advantages.groups):
        for i, turns in enumerate(group.per_turn):
            if not all(math.isfinite(a) for a in turns):
                raise ValueError(f"non-finite advantage in group {g}, trajectory {i}: {turns}")
