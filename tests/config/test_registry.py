"""Estimator and reward registries."""

from __future__ import annotations

import pytest

from agentrl.advantages import GroupMean, LeaveOneOut
from agentrl.registry import (
    ESTIMATORS,
    REWARDS,
    EstimatorOptions,
    RewardOptions,
    make_estimator,
    make_reward,
)
from agentrl.rewards import WinMinusInvalid
from agentrl.testing import synthetic_group


def test_registries_are_read_only() -> None:
    with pytest.raises(TypeError):
        ESTIMATORS["mine"] = lambda o, r: GroupMean()  # type: ignore[index]
    assert set(ESTIMATORS) == {"group_mean", "group_normalized", "leave_one_out", "gigpo"}
    assert set(REWARDS) == {"win_minus_invalid"}


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(ValueError, match="group_mean, group_normalized, leave_one_out"):
        make_estimator("grpo")
    with pytest.raises(ValueError, match="win_minus_invalid"):
        make_reward("score")


def test_built_objects_compute_real_values() -> None:
    estimator = make_estimator("leave_one_out")
    assert isinstance(estimator, LeaveOneOut)
    result = estimator.estimate([synthetic_group([1.0, 0.0, 0.5])])
    assert result.for_trajectory(0, 0)[0] == pytest.approx(0.75)
    normalized = make_estimator("group_normalized", EstimatorOptions(normalized_eps=0.0))
    assert normalized.estimate([synthetic_group([1.0, 0.0])]).for_trajectory(0, 0)[0] == (
        pytest.approx(1.0)
    )
    reward = make_reward("win_minus_invalid", RewardOptions(invalid_penalty=0.5))
    assert reward == WinMinusInvalid(invalid_penalty=0.5)
