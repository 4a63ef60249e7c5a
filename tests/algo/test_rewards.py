"""The default reward: 1[won] - 0.1 * invalid_actions, and its split over turns."""

from __future__ import annotations

import pytest

from agentrl.rewards import WinMinusInvalid
from agentrl.testing import synthetic_trajectory
from agentrl.types import TurnStatus

S = TurnStatus


def test_default_reward_counts_both_kinds_of_invalid_action() -> None:
    trajectory = synthetic_trajectory(
        completion_lens=(2, 2, 2, 2),
        statuses=[S.INVALID_FORMAT, S.NOT_ADMISSIBLE, S.EXECUTED, S.WON],
        won=True,
    )
    assert trajectory.invalid_actions == 2
    assert trajectory.env_steps == 3  # the invalid-format turn did not reach the env
    assert WinMinusInvalid()(trajectory) == pytest.approx(1.0 - 0.2)


def test_lost_episode_and_custom_coefficients() -> None:
    trajectory = synthetic_trajectory(
        completion_lens=(2, 2), statuses=[S.NOT_ADMISSIBLE, S.ENDED], won=False
    )
    assert WinMinusInvalid()(trajectory) == pytest.approx(-0.1)
    assert WinMinusInvalid(win_reward=2.0, invalid_penalty=0.5)(trajectory) == pytest.approx(-0.5)


def test_turn_rewards_sum_to_the_reward_and_land_on_the_right_turns() -> None:
    trajectory = synthetic_trajectory(
        completion_lens=(2, 2, 2), statuses=[S.EXECUTED, S.INVALID_FORMAT, S.WON], won=True
    )
    reward = WinMinusInvalid()
    per_turn = reward.turn_rewards(trajectory)
    assert per_turn == pytest.approx((0.0, -0.1, 1.0))
    assert sum(per_turn) == pytest.approx(reward(trajectory))
