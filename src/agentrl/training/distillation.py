"""On-policy distillation in the update loop: a teacher scores the student's datums and their
advantages become `agentrl.algo.distillation`'s per-token signal before the training step.

`Trainer(distillation=Distillation(teacher, kl_coef, reward_coef))` plays, scores and builds
datums as in RL (every trajectory kept: with a teacher no group is degenerate), then asks the
teacher for the logprobs of each datum's tokens (concurrently) and trains on
`kl_coef * (teacher - student) + reward_coef * R` per trained token. The update's metrics gain
`distill/reverse_kl` (the sampled reverse KL per trained token, student || teacher) and
`distill/teacher_logprob` (the teacher's mean logprob of the student's trained tokens).

With `signal=DistillSignal.TEACHER_TOKENS` the teacher (a `LabellingTeacher`) names its most
likely token at every trained position instead, the datums' targets become those labels
(`agentrl.algo.distillation.teacher_labelled_datums`) and the update trains them with cross
entropy; the metrics gain `distill/agreement` (the share of the student's trained tokens
that were the teacher's choice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentrl.algo.datums import Datum
from agentrl.algo.distillation import (
    datum_tokens,
    distilled_datums,
    label_agreement,
    reverse_kl_per_token,
    teacher_labelled_datums,
    teacher_targets,
)
from agentrl.backends.base import LabellingTeacher, Teacher
from agentrl.config.names import DistillSignal
from agentrl.core.types import Trajectory
from agentrl.training.self_distillation import TrajectoryTeacher

__all__ = ["Distillation", "DistilledBatch", "distill_batch"]


@dataclass(frozen=True)
class Distillation:
    """The teacher of an on-policy distillation run and how its signal mixes with the reward."""

    teacher: Teacher | TrajectoryTeacher
    """Scores tokens (`compute_logprobs`), or a trajectory's datums (`score`: e.g. the
    privileged-context teacher of self-distillation)."""
    kl_coef: float = 1.0
    """Weight of the per-token `teacher - student` logprob gap."""
    reward_coef: float = 0.0
    """Weight of the estimator's advantage (0: pure distillation)."""
    advantage_clip: float | None = None
    """Bound on each token's `teacher - student` gap (None: unbounded; see
    `agentrl.algo.distillation`)."""
    signal: DistillSignal = DistillSignal.REVERSE_KL
    """`reverse_kl`: the per-token `teacher - student` advantage above, trained with the
    configured loss; `teacher_tokens`: the teacher's most likely token at every trained
    position, trained with cross entropy (the teacher must be a `LabellingTeacher`, and
    `kl_coef`, `reward_coef` and `advantage_clip` do not apply)."""

    def __post_init__(self) -> None:
        if DistillSignal(self.signal) is DistillSignal.TEACHER_TOKENS:
            self._check_labelling()
            return
        if not isinstance(self.teacher, Teacher | TrajectoryTeacher):
            raise TypeError(
                f"Distillation.teacher must have `async compute_logprobs(tokens)` or `async "
                f"score(trajectory, tokens)`, got {type(self.teacher).__name__} (a LocalSampler "
                "or RemoteSampler is a teacher; so is a PrivilegedTeacher)"
            )
        if self.kl_coef < 0 or self.reward_coef < 0:
            raise ValueError("Distillation.kl_coef and reward_coef must be >= 0")
        if self.advantage_clip is not None and self.advantage_clip <= 0:
            raise ValueError(
                f"Distillation.advantage_clip must be > 0 (or None), got {self.advantage_clip}"
            )

    def _check_labelling(self) -> None:
        if not isinstance(self.teacher, LabellingTeacher):
            raise TypeError(
                f"Distillation.signal teacher_tokens needs a teacher with `async "
                f"top_tokens(tokens)` (a LabellingTeacher: LocalSampler, PyTRIO/Tinker's "
                f"RemoteSampler or VllmSampler), "
                f"got {type(self.teacher).__name__}; use signal reverse_kl with this teacher"
            )
        if self.reward_coef or self.advantage_clip is not None:
            raise ValueError(
                "Distillation.signal teacher_tokens trains cross entropy on the teacher's "
                "labels: reward_coef and advantage_clip do not apply (leave them at 0 / None)"
            )


@dataclass(frozen=True)
class DistilledBatch:
    """The datums to train, how, and what the teacher said of them."""

    datums: list[Datum]
    metrics: dict[str, float]
    """`distill/reverse_kl` and `distill/teacher_logprob`, or `distill/agreement`."""
    cross_entropy: bool = False
    """Train `datums` with cross entropy (the teacher-token signal), not the policy loss."""


async def distill_batch(
    datums: Sequence[Datum],
    distillation: Distillation,
    trajectories: Sequence[Trajectory] | None = None,
) -> DistilledBatch:
    """Score every datum with the teacher (concurrently) and replace its advantages;
    `trajectories` (one per datum) are what a `TrajectoryTeacher` reads."""
    scorer = distillation.teacher
    if DistillSignal(distillation.signal) is DistillSignal.TEACHER_TOKENS:
        assert isinstance(scorer, LabellingTeacher)  # checked by Distillation
        labels = await asyncio.gather(*(scorer.top_tokens(datum_tokens(d)) for d in datums))
        labelled = teacher_labelled_datums(datums, labels)
        agreement = label_agreement(datums, labelled)
        return DistilledBatch(labelled, {"distill/agreement": agreement}, cross_entropy=True)
    if isinstance(scorer, TrajectoryTeacher):
        if trajectories is None or len(trajectories) != len(datums):
            raise ValueError("a TrajectoryTeacher needs the trajectory of every datum")
        answers = await asyncio.gather(
            *(scorer.score(t, datum_tokens(d)) for t, d in zip(trajectories, datums, strict=True))
        )
    else:
        answers = await asyncio.gather(*(scorer.compute_logprobs(datum_tokens(d)) for d in datums))
    teachers = [teacher_targets(d, a) for d, a in zip(datums, answers, strict=True)]
    trained = distilled_datums(
        datums,
        teachers,
        kl_coef=distillation.kl_coef,
        reward_coef=distillation.reward_coef,
        advantage_clip=distillation.advantage_clip,
    )
    mask = np.concatenate([d.mask for d in datums])
    teacher = np.concatenate(teachers)
    student = np.concatenate([d.logprobs for d in datums])
    on = mask > 0
    scored = float(teacher[on].astype(np.float64).mean()) if on.any() else 0.0
    metrics = {
        "distill/reverse_kl": reverse_kl_per_token(student, teacher, mask),
        "distill/teacher_logprob": scored,
    }
    return DistilledBatch(trained, metrics)
