"""On-policy distillation's per-token advantages on hand-built datums."""

from __future__ import annotations

import numpy as np
import pytest

from agentrl.algo.datums import Datum
from agentrl.algo.distillation import (
    datum_tokens,
    distillation_advantages,
    distilled_datums,
    label_agreement,
    reverse_kl_per_token,
    teacher_labelled_datums,
    teacher_targets,
)


def _datum() -> Datum:
    """Prompt [1, 2, 3], reply [4, 5]: targets shift by one, the reply's two tokens trained."""
    return Datum(
        model_input=np.array([1, 2, 3, 4]),
        target_tokens=np.array([2, 3, 4, 5]),
        logprobs=np.array([0.0, 0.0, -1.0, -2.0], dtype=np.float32),
        advantages=np.array([0.0, 0.0, 0.5, 0.5], dtype=np.float32),
        mask=np.array([0, 0, 1, 1], dtype=np.float32),
    )


def test_the_advantage_is_teacher_minus_student_on_trained_tokens_only() -> None:
    datum = _datum()
    assert datum_tokens(datum) == [1, 2, 3, 4, 5]
    teacher = teacher_targets(datum, [None, -9.0, -9.0, -0.25, -3.0])  # one per token
    np.testing.assert_array_equal(teacher, [-9.0, -9.0, -0.25, -3.0])
    advantages = distillation_advantages(datum, teacher)
    np.testing.assert_allclose(advantages, [0.0, 0.0, 0.75, -1.0])  # q - s; 0 off the mask
    mixed = distillation_advantages(datum, teacher, kl_coef=2.0, reward_coef=1.0)
    np.testing.assert_allclose(mixed, [0.0, 0.0, 2.0, -1.5])  # 2 (q - s) + 0.5
    assert reverse_kl_per_token(datum.logprobs, teacher, datum.mask) == pytest.approx(0.125)
    (trained,) = distilled_datums([datum], [teacher])
    np.testing.assert_allclose(trained.advantages, advantages)
    np.testing.assert_array_equal(trained.logprobs, datum.logprobs)  # behaviour unchanged
    np.testing.assert_array_equal(trained.mask, datum.mask)


def test_a_teacher_that_missed_a_trained_token_is_an_error() -> None:
    datum = _datum()
    unscored_prompt = teacher_targets(datum, [None, None, None, -1.0, -2.0])
    np.testing.assert_allclose(distillation_advantages(datum, unscored_prompt), 0.0)  # fine
    with pytest.raises(ValueError, match=r"no logprob for trained position\(s\) \[3\]"):
        distillation_advantages(datum, teacher_targets(datum, [None, -1, -1, -1, None]))
    with pytest.raises(ValueError, match="returned 4 logprobs for a datum of 5 tokens"):
        teacher_targets(datum, [None, -1.0, -1.0, -1.0])
    with pytest.raises(ValueError, match="1 teacher logprob arrays for 2 datums"):
        distilled_datums([datum, datum], [np.zeros(4, dtype=np.float32)])


def test_the_advantage_clip_bounds_each_tokens_gap_before_the_reward_is_added() -> None:
    datum = _datum()
    teacher = teacher_targets(datum, [None, -9.0, -9.0, -0.25, -12.0])  # gaps +0.75 and -10
    clipped = distillation_advantages(datum, teacher, advantage_clip=0.5)
    np.testing.assert_allclose(clipped, [0.0, 0.0, 0.5, -0.5])
    mixed = distillation_advantages(
        datum, teacher, kl_coef=2.0, reward_coef=1.0, advantage_clip=0.5
    )
    np.testing.assert_allclose(mixed, [0.0, 0.0, 1.5, -0.5])  # 2 clip(q - s) + 0.5
    np.testing.assert_allclose(distillation_advantages(datum, teacher), [0, 0, 0.75, -10.0])
    (trained,) = distilled_datums([datum], [teacher], advantage_clip=0.5)
    np.testing.assert_allclose(trained.advantages, clipped)
    with pytest.raises(ValueError, match="advantage_clip must be > 0"):
        distillation_advantages(datum, teacher, advantage_clip=0.0)


def test_teacher_labels_replace_the_trained_targets_only() -> None:
    datum = _datum()  # trained targets 4 and 5 (the reply)
    (labelled,) = teacher_labelled_datums([datum], [[None, 7, 8, 4, 9]])
    np.testing.assert_array_equal(labelled.target_tokens, [2, 3, 4, 9])  # prompt targets kept
    np.testing.assert_array_equal(labelled.model_input, datum.model_input)  # the student's
    np.testing.assert_array_equal(labelled.mask, datum.mask)
    np.testing.assert_array_equal(datum.target_tokens, [2, 3, 4, 5])  # the input untouched
    assert label_agreement([datum], [labelled]) == pytest.approx(0.5)  # 4 agreed, 5 did not
    (same,) = teacher_labelled_datums([datum], [[None, None, None, 4, 5]])  # prompt unlabelled
    assert label_agreement([datum], [same]) == 1.0


def test_a_teacher_that_left_a_trained_position_unlabelled_is_an_error() -> None:
    datum = _datum()
    with pytest.raises(ValueError, match=r"no label for trained position\(s\) \[3\]"):
        teacher_labelled_datums([datum], [[None, 1, 1, 1, None]])
    with pytest.raises(ValueError, match="returned 4 labels for a datum of 5 tokens"):
        teacher_labelled_datums([datum], [[None, 1, 1, 1]])
    with pytest.raises(ValueError, match="1 teacher label lists for 2 datums"):
        teacher_labelled_datums([datum, datum], [[None, 1, 1, 1, 1]])
