"""On-policy distillation's per-token signal (the math; the teacher that scores is a
`agentrl.backends.base.Teacher`).

The student samples a trajectory through the normal rollout engine; a teacher scores the
student's own tokens. On the trained (assistant) tokens, with the student's sampling logprob
`s_t` (`Datum.logprobs`) and the teacher's logprob `q_t` of the same token in the same context,

    A_t = kl_coef * clip(q_t - s_t, -c, c) + reward_coef * R

where `c` is `advantage_clip` (None: no clip) and `R` is the datum's environment advantage
(the advantage it already carries, e.g. reward - group mean). `s_t - q_t` is the per-token
sample of the reverse KL KL(student || teacher), so the importance-sampling loss `-r_t * A_t`
on these advantages descends the reverse KL (tinker-cookbook's and the series' OPD);
`reward_coef = 0` is pure distillation. Positions outside the mask keep advantage 0. The clip
bounds what one token can weigh: a student far from its teacher samples tokens the teacher
gives logprobs of -10 or less, and unclipped those few tokens' pushes dominate the step (and
can break the reply format); clipped, every disagreement still pushes the right way, by at
most `c`.

The other signal, teacher tokens: at every trained position the teacher names the token it
finds most likely in the student's context (`LabellingTeacher.top_tokens`), and
`teacher_labelled_datums` make it that position's target, so that cross entropy trains the
student towards the teacher's choice in the states the student itself reaches (on-policy
imitation, DAgger's hard labels). Where the sampled reverse KL only pushes the student's
own token down when the teacher disagrees (moving its mass to every other token alike),
the label says which token to put it on; and cross entropy tolerates several optimizer
steps per batch where a policy-gradient loss drifts off its samples. `label_agreement` is
the share of trained positions where the student sampled the teacher's token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from agentrl.algo.datums import Datum

__all__ = [
    "datum_tokens",
    "distillation_advantages",
    "distilled_datums",
    "label_agreement",
    "reverse_kl_per_token",
    "teacher_labelled_datums",
    "teacher_targets",
]

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


def datum_tokens(datum: Datum) -> list[int]:
    """The datum's whole token sequence (its inputs, then its last target): what a teacher
    scores so that entry `i + 1` of the teacher's answer is the logprob of `target_tokens[i]`."""
    return [*datum.model_input.tolist(), int(datum.target_tokens[-1])]


def _per_target(datum: Datum, prompt_aligned: Sequence[T], what: str) -> Sequence[T]:
    """A teacher's prompt-aligned answer for `datum_tokens(datum)` as one entry per target
    position (the first, for nothing, dropped). Refuses a wrong length, naming `what`."""
    expected = len(datum.model_input) + 1
    if len(prompt_aligned) != expected:
        raise ValueError(
            f"the teacher returned {len(prompt_aligned)} {what} for a datum of {expected} "
            "tokens: it must answer for every token of `datum_tokens(datum)`"
        )
    return prompt_aligned[1:]


def teacher_targets(datum: Datum, prompt_aligned: Sequence[float | None]) -> FloatArray:
    """A teacher's prompt-aligned logprobs of `datum_tokens(datum)` as one logprob per target
    token (NaN where the teacher gave none). Refuses a wrong length."""
    scores = _per_target(datum, prompt_aligned, "logprobs")
    return np.array([np.nan if v is None else float(v) for v in scores], dtype=np.float32)


def reverse_kl_per_token(student: FloatArray, teacher: FloatArray, mask: FloatArray) -> float:
    """Mean over the masked tokens of `student - teacher` (the sampled reverse-KL estimate
    KL(student || teacher) per token; 0.0 with no masked token)."""
    on = mask > 0
    if not on.any():
        return 0.0
    return float(np.mean(student[on].astype(np.float64) - teacher[on].astype(np.float64)))


def distillation_advantages(
    datum: Datum,
    teacher: FloatArray,
    *,
    kl_coef: float = 1.0,
    reward_coef: float = 0.0,
    advantage_clip: float | None = None,
) -> FloatArray:
    """Per-token advantages `kl_coef * clip(teacher - student) + reward_coef * advantage` on
    the masked positions, 0 elsewhere (see the module docstring). A masked position the
    teacher did not score (NaN) is an error naming it."""
    if advantage_clip is not None and advantage_clip <= 0:
        raise ValueError(f"advantage_clip must be > 0 (or None), got {advantage_clip}")
    if teacher.shape != datum.logprobs.shape:
        raise ValueError(
            f"teacher logprobs have shape {teacher.shape}, the datum's {datum.logprobs.shape}"
        )
    on = datum.mask > 0
    missing = np.flatnonzero(on & np.isnan(teacher))
    if missing.size:
        raise ValueError(
            f"the teacher gave no logprob for trained position(s) {missing[:5].tolist()}"
        )
    out = np.zeros_like(datum.logprobs, dtype=np.float32)
    gap = teacher[on].astype(np.float64) - datum.logprobs[on].astype(np.float64)
    if advantage_clip is not None:
        gap = np.clip(gap, -advantage_clip, advantage_clip)
    out[on] = kl_coef * gap + reward_coef * datum.advantages[on]
    return out


def distilled_datums(
    datums: Sequence[Datum],
    teachers: Sequence[FloatArray],
    *,
    kl_coef: float = 1.0,
    reward_coef: float = 0.0,
    advantage_clip: float | None = None,
) -> list[Datum]:
    """The datums with their advantages replaced by `distillation_advantages` (tokens, masks
    and behaviour logprobs unchanged)."""
    if len(datums) != len(teachers):
        raise ValueError(f"{len(teachers)} teacher logprob arrays for {len(datums)} datums")
    return [
        replace(
            d,
            advantages=distillation_advantages(
                d, t, kl_coef=kl_coef, reward_coef=reward_coef, advantage_clip=advantage_clip
            ),
        )
        for d, t in zip(datums, teachers, strict=True)
    ]


def _teacher_labels(datum: Datum, prompt_aligned: Sequence[int | None]) -> IntArray:
    """A teacher's prompt-aligned labels of `datum_tokens(datum)` as one label per target
    position (-1 where it gave none). Refuses a wrong length, or a trained position left
    without a label (naming it)."""
    answer = _per_target(datum, prompt_aligned, "labels")
    labels = np.array([-1 if v is None else int(v) for v in answer], dtype=np.int64)
    missing = np.flatnonzero((datum.mask > 0) & (labels < 0))
    if missing.size:
        raise ValueError(
            f"the teacher gave no label for trained position(s) {missing[:5].tolist()}"
        )
    return labels


def teacher_labelled_datums(
    datums: Sequence[Datum], labels: Sequence[Sequence[int | None]]
) -> list[Datum]:
    """The datums with the target of every trained (masked) position replaced by the
    teacher's label there (`labels`: one prompt-aligned answer of `top_tokens` per datum, for
    `datum_tokens(datum)`); inputs, masks and every untrained target unchanged, so the
    student's own tokens stay the context. Trained with cross entropy."""
    if len(datums) != len(labels):
        raise ValueError(f"{len(labels)} teacher label lists for {len(datums)} datums")
    out = []
    for datum, answer in zip(datums, labels, strict=True):
        taught = _teacher_labels(datum, answer)
        on = datum.mask > 0
        targets = datum.target_tokens.copy()
        targets[on] = taught[on].astype(targets.dtype)
        out.append(replace(datum, target_tokens=targets))
    return out


def label_agreement(sampled: Sequence[Datum], labelled: Sequence[Datum]) -> float:
    """Share of the trained positions where the student's sampled token is the teacher's
    label (`labelled`: `teacher_labelled_datums(sampled, ...)`; 0.0 with none trained)."""
    same = total = 0
    for before, after in zip(sampled, labelled, strict=True):
        on = before.mask > 0
        same += int((before.target_tokens[on] == after.target_tokens[on]).sum())
        total += int(on.sum())
    return same / total if total else 0.0
