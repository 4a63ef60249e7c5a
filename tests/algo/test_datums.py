"""Datums: shift alignment, masks, logprob and advantage placement."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.advantages import GroupMean
from agentrl.datums import (
    PrefixError,
    build_datums,
    has_signal,
    trajectory_to_datum,
    trajectory_to_datums,
)
from agentrl.testing import synthetic_group, synthetic_trajectory
from agentrl.types import (
    CompletionStop,
    ParsedAction,
    StopReason,
    TaskInfo,
    Trajectory,
    Turn,
    TurnStatus,
)


def _turn(prompt: tuple[int, ...], completion: tuple[int, ...], lps: tuple[float, ...]) -> Turn:
    return Turn(
        prompt_tokens=prompt,
        completion_tokens=completion,
        logprobs=lps,
        assistant_text="",
        parsed=ParsedAction(action="look"),
        status=TurnStatus.EXECUTED,
        env_step=None,
    )


def test_hand_computed_two_turn_datum() -> None:
    # prompt [1 2 3], completion [10 11] (lp -.1 -.2), tool delta [4 5], completion [12] (lp -.3)
    t1 = _turn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = _turn((1, 2, 3, 10, 11, 4, 5), (12,), (-0.3,))
    trajectory = Trajectory(
        turns=(t1, t2), stop_reason=StopReason.WON, won=True, group_id="g", task=TaskInfo("g")
    )
    datum = trajectory_to_datum(trajectory, [0.5, -0.25])
    assert datum.model_input.tolist() == [1, 2, 3, 10, 11, 4, 5]
    assert datum.target_tokens.tolist() == [2, 3, 10, 11, 4, 5, 12]
    assert datum.logprobs.tolist() == pytest.approx([0, 0, -0.1, -0.2, 0, 0, -0.3])
    assert datum.advantages.tolist() == pytest.approx([0, 0, 0.5, 0.5, 0, 0, -0.25])
    assert datum.mask.tolist() == [0, 0, 1, 1, 0, 0, 1]
    assert datum.num_assistant_tokens == 3


def test_an_untrained_turn_stays_in_the_sequence_without_targets() -> None:
    """`trained=[False, True]`: the first reply is context (mask 0), the second a target."""
    t1 = _turn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = _turn((1, 2, 3, 10, 11, 4, 5), (12,), (-0.3,))
    trajectory = Trajectory(
        turns=(t1, t2), stop_reason=StopReason.WON, won=True, group_id="g", task=TaskInfo("g")
    )
    datum = trajectory_to_datum(trajectory, [1.0, 1.0], trained=[False, True])
    assert datum.model_input.tolist() == [1, 2, 3, 10, 11, 4, 5]
    assert datum.mask.tolist() == [0, 0, 0, 0, 0, 0, 1]
    assert datum.num_assistant_tokens == 1
    every = trajectory_to_datum(trajectory, [1.0, 1.0], trained=[True, True])
    assert every.mask.tolist() == trajectory_to_datum(trajectory, [1.0, 1.0]).mask.tolist()
    with pytest.raises(ValueError, match="1 trained flags for a trajectory of 2 turns"):
        trajectory_to_datum(trajectory, [1.0, 1.0], trained=[True])


def test_context_weight_targets_the_environments_text_and_no_reply() -> None:
    """`context_weight` (imitation's auxiliary loss): the first prompt and each tool message
    between two replies become targets at that weight; a later segment's opening prompt (it
    repeats replies) and every reply but the trained ones stay at 0."""
    t1 = _turn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = _turn((1, 2, 3, 10, 11, 4, 5), (12,), (-0.3,))  # a mistake: not trained
    t3 = replace(_turn((1, 2, 12, 6, 7), (13,), (-0.4,)), new_segment=True)  # a cut prompt
    t4 = _turn((1, 2, 12, 6, 7, 13, 8), (14,), (-0.5,))
    trajectory = Trajectory(
        turns=(t1, t2, t3, t4),
        stop_reason=StopReason.WON,
        won=True,
        group_id="g",
        task=TaskInfo("g"),
    )
    trained = [True, False, True, True]
    first, second = trajectory_to_datums(trajectory, [1.0] * 4, trained=trained, context_weight=0.5)
    assert first.target_tokens.tolist() == [2, 3, 10, 11, 4, 5, 12]
    assert first.mask.tolist() == [0.5, 0.5, 1, 1, 0.5, 0.5, 0]
    assert second.target_tokens.tolist() == [2, 12, 6, 7, 13, 8, 14]
    assert second.mask.tolist() == [0, 0, 0, 0, 1, 0.5, 1]
    assert (first.num_assistant_tokens, second.num_assistant_tokens) == (6, 3)
    plain = trajectory_to_datums(trajectory, [1.0] * 4, trained=trained)
    assert [d.mask.tolist() for d in plain] == [[0, 0, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 1]]
    with pytest.raises(ValueError, match="context_weight must be >= 0"):
        trajectory_to_datums(trajectory, [1.0] * 4, context_weight=-0.1)


def test_prefix_violation_is_detected() -> None:
    t1 = _turn((1, 2, 3), (10,), (-0.1,))
    t2 = _turn((1, 9, 3, 10, 4), (12,), (-0.3,))  # history re-tokenized differently
    trajectory = Trajectory(
        turns=(t1, t2), stop_reason=StopReason.WON, won=True, group_id="g", task=TaskInfo("g")
    )
    with pytest.raises(PrefixError, match="turn 0"):
        trajectory_to_datum(trajectory, [1.0, 1.0])


def test_wrong_number_of_advantages() -> None:
    trajectory = synthetic_trajectory(completion_lens=(2, 2))
    with pytest.raises(ValueError, match="1 advantages for a trajectory of 2 turns"):
        trajectory_to_datum(trajectory, [1.0])


def test_build_datums_skips_zero_advantage_and_degenerate_groups() -> None:
    groups = [
        synthetic_group([1.0, 0.0, 0.5], group_id="a"),  # 0.5 is exactly the mean -> skipped
        synthetic_group([0.3, 0.3], group_id="b"),  # degenerate -> all skipped
    ]
    advantages = GroupMean().estimate(groups)
    datums = build_datums(groups, advantages)
    assert len(datums) == 2
    assert len(build_datums(groups, advantages, skip_zero_advantage=False)) == 5
    assert not has_signal([0.0, 0.0]) and has_signal([0.0, 1e-3])


@st.composite
def trajectories(draw: st.DrawFn) -> tuple[Trajectory, list[float]]:
    n = draw(st.integers(min_value=1, max_value=6))
    completion_lens = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    tool_lens = draw(st.lists(st.integers(0, 9), min_size=n - 1, max_size=n - 1))
    prompt_len = draw(st.integers(1, 20))
    seed = draw(st.integers(0, 10_000))
    advs = draw(
        st.lists(
            st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=32),
            min_size=n,
            max_size=n,
        )
    )
    t = synthetic_trajectory(
        prompt_len=prompt_len, completion_lens=completion_lens, tool_lens=tool_lens, seed=seed
    )
    return t, advs


@settings(max_examples=300, deadline=None)
@given(case=trajectories())
def test_datum_properties(case: tuple[Trajectory, list[float]]) -> None:
    trajectory, advs = case
    datum = trajectory_to_datum(trajectory, advs)
    full = np.array(trajectory.full_tokens)
    # Lengths and shift alignment.
    assert len(datum) == len(full) - 1
    assert np.array_equal(datum.model_input, full[:-1])
    assert np.array_equal(datum.target_tokens, full[1:])
    # Mask is exactly the sampled completion tokens (ids >= 100000 in synthetic data).
    sampled = datum.target_tokens >= 100_000
    assert np.array_equal(datum.mask.astype(bool), sampled)
    assert datum.num_assistant_tokens == sum(len(t.completion_tokens) for t in trajectory.turns)
    # Zero advantage and logprob off assistant tokens.
    assert not datum.advantages[~sampled].any()
    assert not datum.logprobs[~sampled].any()
    # Logprob and advantage alignment, turn by turn.
    for turn, adv in zip(trajectory.turns, advs, strict=True):
        start = len(turn.prompt_tokens) - 1
        end = start + len(turn.completion_tokens)
        assert np.array_equal(datum.target_tokens[start:end], turn.completion_tokens)
        assert datum.logprobs[start:end] == pytest.approx(turn.logprobs, abs=1e-6)
        assert datum.advantages[start:end] == pytest.approx([adv] * (end - start), abs=1e-6)


def test_completion_records_validate_lengths() -> None:
    from agentrl.types import Completion

    with pytest.raises(ValueError, match="2 tokens but 1 logprobs"):
        Completion(tokens=(1, 2), logprobs=(-0.1,), stop_reason=CompletionStop.STOP)
    with pytest.raises(ValueError):
        replace(_turn((1,), (2,), (-0.1,)), logprobs=())


def test_a_completion_datum_trains_the_reply_only() -> None:
    from agentrl.algo.datums import completion_datum

    datum = completion_datum([1, 2, 3], [4, 5], [-0.5, -0.25], advantage=2.0)
    np.testing.assert_array_equal(datum.model_input, [1, 2, 3, 4])
    np.testing.assert_array_equal(datum.target_tokens, [2, 3, 4, 5])
    np.testing.assert_array_equal(datum.mask, [0, 0, 1, 1])
    np.testing.assert_array_equal(datum.logprobs, [0, 0, -0.5, -0.25])
    np.testing.assert_array_equal(datum.advantages, [0, 0, 2, 2])
    with pytest.raises(ValueError, match="2 logprobs for a reply of 1 tokens"):
        completion_datum([1], [2], [-1.0, -1.0])
    with pytest.raises(ValueError, match="needs a prompt token"):
        completion_datum([], [2], [-1.0])
