"""Name-to-object registries: the estimators and reward functions a config can name.

Configs and the command line choose components by name; Python users may pass objects
instead. The registries are read-only mappings of the built-in factories (no mutable global
state): to use a custom estimator or reward, pass the object to the trainer directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentrl.algo.advantages import (
    AdvantageEstimator,
    GiGPO,
    GroupMean,
    GroupNormalized,
    LeaveOneOut,
)
from agentrl.algo.rewards import RewardFn, WinMinusInvalid

__all__ = [
    "ESTIMATORS",
    "REWARDS",
    "EstimatorOptions",
    "RewardOptions",
    "make_estimator",
    "make_reward",
]


@dataclass(frozen=True)
class RewardOptions:
    """Coefficients of the built-in reward functions."""

    win_reward: float = 1.0
    """Reward for a won episode."""
    invalid_penalty: float = 0.1
    """Penalty per invalid action (bad tool-call format or non-admissible action)."""


@dataclass(frozen=True)
class EstimatorOptions:
    """Hyper-parameters of the built-in advantage estimators."""

    normalized_eps: float = 1e-6
    """`group_normalized`: added to the group std before dividing."""
    gigpo_gamma: float = 0.95
    """`gigpo`: discount of the per-turn step returns."""
    gigpo_omega: float = 1.0
    """`gigpo`: weight of the step-level advantage."""
    gigpo_normalize_step: bool = False
    """`gigpo`: divide step advantages by their anchor group's std."""


def _win_minus_invalid(options: RewardOptions) -> RewardFn:
    return WinMinusInvalid(win_reward=options.win_reward, invalid_penalty=options.invalid_penalty)


REWARDS: Mapping[str, Callable[[RewardOptions], RewardFn]] = MappingProxyType(
    {"win_minus_invalid": _win_minus_invalid}
)
"""Built-in reward functions by name."""


def _gigpo(options: EstimatorOptions, reward_fn: RewardFn) -> AdvantageEstimator:
    return GiGPO(
        gamma=options.gigpo_gamma,
        omega=options.gigpo_omega,
        normalize_step=options.gigpo_normalize_step,
        reward_fn=reward_fn,
    )


ESTIMATORS: Mapping[str, Callable[[EstimatorOptions, RewardFn], AdvantageEstimator]] = (
    MappingProxyType(
        {
            "group_mean": lambda options, reward_fn: GroupMean(),
            "group_normalized": lambda options, reward_fn: GroupNormalized(
                eps=options.normalized_eps
            ),
            "leave_one_out": lambda options, reward_fn: LeaveOneOut(),
            "gigpo": _gigpo,
        }
    )
)
"""Built-in advantage estimators by name (the reward function feeds step-level ones)."""


def _unknown(kind: str, name: str, known: Mapping[str, object]) -> ValueError:
    return ValueError(
        f"unknown {kind} {name!r}; choose one of {', '.join(sorted(known))} "
        f"(or pass your own {kind} object in Python)"
    )


def make_reward(name: str, options: RewardOptions | None = None) -> RewardFn:
    """The built-in reward function called `name`."""
    try:
        factory = REWARDS[name]
    except KeyError:
        raise _unknown("reward", name, REWARDS) from None
    return factory(options or RewardOptions())


def make_estimator(
    name: str, options: EstimatorOptions | None = None, reward_fn: RewardFn | None = None
) -> AdvantageEstimator:
    """The built-in advantage estimator called `name`."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        raise _unknown("estimator", name, ESTIMATORS) from None
    return factory(options or EstimatorOptions(), reward_fn or WinMinusInvalid())
