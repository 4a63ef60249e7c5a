"""Advantage estimators: hand-computed examples and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.advantages import GroupMean, GroupNormalized, LeaveOneOut
from agentrl.testing import synthetic_group, synthetic_trajectory
from agentrl.types import StopReason, TaskInfo, TrajectoryGroup


def test_group_mean_hand_computed() -> None:
    group = synthetic_group([1.0, 0.0, -0.2, 0.6], turns=3)
    result = GroupMean().estimate([group])
    # mean = 0.35
    expected = [0.65, -0.35, -0.55, 0.25]
    for row, value in zip(result.groups[0].per_turn, expected, strict=True):
        assert row == pytest.approx((value,) * 3)
    assert result.degenerate_groups == 0


def test_group_normalized_hand_computed() -> None:
    group = synthetic_group([1.0, 0.0])
    result = GroupNormalized(eps=0.0).estimate([group])
    # mean 0.5, population std 0.5 -> +1, -1
    assert result.for_trajectory(0, 0) == pytest.approx((1.0, 1.0))
    assert result.for_trajectory(0, 1) == pytest.approx((-1.0, -1.0))


def test_leave_one_out_hand_computed() -> None:
    group = synthetic_group([1.0, 0.0, 0.5])
    result = LeaveOneOut().estimate([group])
    # 1 - (0 + .5)/2 = .75 ; 0 - (1 + .5)/2 = -.75 ; .5 - (1 + 0)/2 = 0
    assert [row[0] for row in result.groups[0].per_turn] == pytest.approx([0.75, -0.75, 0.0])


@pytest.mark.parametrize("estimator", [GroupMean(), GroupNormalized(), LeaveOneOut()])
def test_degenerate_groups_are_zero_and_counted(estimator: GroupMean) -> None:
    groups = [synthetic_group([0.5] * 4, group_id="a"), synthetic_group([1.0, 0.0], group_id="b")]
    result = estimator.estimate(groups)
    assert result.degenerate_groups == 1
    assert result.groups[0].degenerate and not result.groups[1].degenerate
    assert all(a == 0.0 for row in result.groups[0].per_turn for a in row)
    assert all(result.groups[0].is_zero(i) for i in range(4))


def test_error_trajectories_are_left_out_of_statistics() -> None:
    ok = [synthetic_trajectory(reward=r, won=r > 0, branch=i) for i, r in enumerate([1.0, 0.0])]
    crashed = synthetic_trajectory(reward=-5.0, stop_reason=StopReason.ENV_ERROR, branch=2)
    group = TrajectoryGroup("g", TaskInfo("g"), (*ok, crashed))
    result = GroupMean().estimate([group])
    assert [row[0] for row in result.groups[0].per_turn] == pytest.approx([0.5, -0.5, 0.0])


def test_only_errors_is_degenerate() -> None:
    crashed = synthetic_trajectory(reward=0.0, stop_reason=StopReason.SAMPLER_ERROR)
    result = GroupMean().estimate([TrajectoryGroup("g", TaskInfo("g"), (crashed,))])
    assert result.degenerate_groups == 1


rewards_lists = st.lists(
    st.floats(min_value=-5, max_value=5, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=10,
)


@settings(max_examples=200, deadline=None)
@given(rewards=rewards_lists, turns=st.integers(min_value=1, max_value=4))
def test_properties_of_trajectory_level_estimators(rewards: list[float], turns: int) -> None:
    group = synthetic_group(rewards, turns=turns)
    degenerate = max(rewards) - min(rewards) <= 1e-9
    for estimator in (GroupMean(), GroupNormalized(), LeaveOneOut()):
        result = estimator.estimate([group])
        rows = result.groups[0].per_turn
        assert len(rows) == len(rewards)
        assert all(len(row) == turns and len(set(row)) == 1 for row in rows)
        values = np.array([row[0] for row in rows])
        assert all(math.isfinite(v) for v in values)
        assert result.groups[0].degenerate == degenerate
        if degenerate:
            assert not values.any()
        else:
            # Centered estimators sum to zero over the group.
            assert values.sum() == pytest.approx(0.0, abs=1e-6)
            # Ordering of advantages follows ordering of rewards.
            order = np.argsort(rewards, kind="stable")
            assert np.all(np.diff(values[order]) >= -1e-9)
    mean_adv = np.array([r[0] for r in GroupMean().estimate([group]).groups[0].per_turn])
    if not degenerate:
        assert mean_adv == pytest.approx(np.array(rewards) - np.mean(rewards))
        loo = np.array([r[0] for r in LeaveOneOut().estimate([group]).groups[0].per_turn])
        if len(rewards) > 1:
            assert loo == pytest.approx(mean_adv * len(rewards) / (len(rewards) - 1), abs=1e-9)
