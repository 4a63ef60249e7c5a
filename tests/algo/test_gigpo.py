"""GiGPO against hand-computed examples."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentrl.advantages import GiGPO, GroupNormalized
from agentrl.rewards import WinMinusInvalid
from agentrl.testing import synthetic_trajectory
from agentrl.types import TaskInfo, TrajectoryGroup, TurnStatus

S = TurnStatus


def _group(*trajectories):  # type: ignore[no-untyped-def]
    reward = WinMinusInvalid()
    scored = tuple(replace(t, reward=reward(t)) for t in trajectories)
    return TrajectoryGroup("g", TaskInfo("g"), scored)


def _traj(statuses, keys, won, branch):  # type: ignore[no-untyped-def]
    return synthetic_trajectory(
        completion_lens=(2,) * len(statuses),
        statuses=statuses,
        state_keys=keys,
        won=won,
        branch=branch,
    )


def test_shared_anchor_states_at_different_depths() -> None:
    # A: s0 -> s1 -> win (2 turns).  B: s0 -> (invalid, stays s0) -> s1 -> win (3 turns).
    a = _traj([S.EXECUTED, S.WON], ["s0", "s1"], True, 0)
    b = _traj([S.INVALID_FORMAT, S.EXECUTED, S.WON], ["s0", "s0", "s1"], True, 1)
    group = _group(a, b)
    assert group.rewards == pytest.approx((1.0, 0.9))
    gamma = 0.5
    result = GiGPO(gamma=gamma).estimate([group])
    # Episode: mean 0.95 -> A: +0.05, B: -0.05.
    # Step returns: A: t0 = 0 + .5*1 = .5, t1 = 1.  B: t0 = -.1 + .5*(0 + .5*1) = .15,
    # t1 = 0 + .5*1 = .5, t2 = 1.
    # Anchor s0: {A.t0 .5, B.t0 .15, B.t1 .5} mean 1.15/3; anchor s1: {A.t1 1, B.t2 1} -> 0.
    m0 = (0.5 + 0.15 + 0.5) / 3
    expected_a = (0.05 + (0.5 - m0), 0.05 + 0.0)
    expected_b = (-0.05 + (0.15 - m0), -0.05 + (0.5 - m0), -0.05 + 0.0)
    assert result.groups[0].per_turn[0] == pytest.approx(expected_a)
    assert result.groups[0].per_turn[1] == pytest.approx(expected_b)
    assert not result.groups[0].degenerate


def test_singletons_and_missing_keys_get_only_the_episode_advantage() -> None:
    a = _traj([S.EXECUTED, S.WON], ["x", None], True, 0)
    b = _traj([S.EXECUTED, S.ENDED], ["y", "z"], False, 1)
    result = GiGPO(omega=3.0).estimate([_group(a, b)])
    assert result.groups[0].per_turn[0] == pytest.approx((0.5, 0.5))
    assert result.groups[0].per_turn[1] == pytest.approx((-0.5, -0.5))


def test_std_normalisation_and_omega() -> None:
    a = _traj([S.EXECUTED, S.WON], ["s0", "s1"], True, 0)
    b = _traj([S.EXECUTED, S.ENDED], ["s0", "s2"], False, 1)
    gamma = 0.9
    # Step returns at s0: A = .9, B = 0 -> centered +-.45, std .45 -> +-1 when normalised.
    plain = GiGPO(gamma=gamma, omega=0.5).estimate([_group(a, b)])
    assert plain.groups[0].per_turn[0][0] == pytest.approx(0.5 + 0.5 * 0.45)
    normed = GiGPO(gamma=gamma, omega=0.5, normalize_step=True, eps=0.0).estimate([_group(a, b)])
    assert normed.groups[0].per_turn[0][0] == pytest.approx(0.5 + 0.5 * 1.0)
    assert normed.groups[0].per_turn[1][0] == pytest.approx(-0.5 - 0.5 * 1.0)
    # A different episode estimator plugs in.
    grpo = GiGPO(gamma=gamma, omega=0.0, episode=GroupNormalized(eps=0.0))
    assert grpo.estimate([_group(a, b)]).groups[0].per_turn[0] == pytest.approx((1.0, 1.0))


def test_equal_rewards_but_different_timing_is_not_degenerate() -> None:
    # Both win (reward 1) but A wins one step sooner from the shared state s0.
    a = _traj([S.EXECUTED, S.WON], ["s0", "s1"], True, 0)
    b = _traj([S.EXECUTED, S.EXECUTED, S.WON], ["s0", "s2", "s3"], True, 1)
    result = GiGPO(gamma=0.5).estimate([_group(a, b)])
    assert not result.groups[0].degenerate
    assert result.groups[0].per_turn[0][0] > 0 > result.groups[0].per_turn[1][0]
    identical = GiGPO().estimate([_group(a, a)])
    assert identical.groups[0].degenerate
