"""Sampler-vs-trainer logprob mismatch: how far the training forward pass is from the sampler.

Every assistant token of a datum was sampled with a logprob (`Datum.logprobs`); the training
backend recomputes it (`loss_fn_outputs["logprobs"]` on the remote services, the local forward
pass on the local backend). On the first step of a run both are the same weights, so the two
agree up to numerics; a wrong chat template, a re-tokenised history or a sampler/trainer
precision gap shows up here first, before it shows up as a learning problem.

    KL(sampler || trainer) ~= mean over assistant tokens of  r - 1 - log r,  r = p_train / p_sample

(the non-negative "k3" estimator of the KL from samples of the sampler; 0 when they agree),
and the largest |log p_train - log p_sample| over the same tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agentrl.algo.datums import Datum

__all__ = ["LogprobMismatch", "datum_mismatch", "logprob_mismatch", "merge_mismatch"]


@dataclass(frozen=True)
class LogprobMismatch:
    """Agreement of sampler and trainer logprobs over the assistant tokens of one batch."""

    sampler_kl: float
    """Estimated KL(sampler || trainer) per assistant token (k3 estimator, >= 0)."""
    max_abs_diff: float
    """Largest |trainer logprob - sampler logprob| over the assistant tokens."""
    tokens: int
    """Assistant tokens compared."""


def logprob_mismatch(sampler: npt.ArrayLike, trainer: npt.ArrayLike) -> LogprobMismatch | None:
    """Mismatch of two aligned 1-D arrays of logprobs (None when there is no token)."""
    old = np.asarray(sampler, dtype=np.float64).ravel()
    new = np.asarray(trainer, dtype=np.float64).ravel()
    if old.shape != new.shape:
        raise ValueError(f"{old.size} sampler logprobs but {new.size} trainer logprobs")
    if old.size == 0:
        return None
    log_ratio = new - old
    k3 = np.expm1(log_ratio) - log_ratio
    return LogprobMismatch(
        sampler_kl=float(np.mean(k3)),
        max_abs_diff=float(np.max(np.abs(log_ratio))),
        tokens=int(old.size),
    )


def datum_mismatch(
    datums: Sequence[Datum], trainer_logprobs: Sequence[npt.ArrayLike]
) -> LogprobMismatch | None:
    """Mismatch over the assistant tokens (mask > 0) of `datums`, given the trainer's logprob
    of every target position of each datum (as the services' `loss_fn_outputs` return them)."""
    if len(trainer_logprobs) != len(datums):
        raise ValueError(f"{len(trainer_logprobs)} logprob outputs for {len(datums)} datums")
    old, new = [], []
    for index, (datum, values) in enumerate(zip(datums, trainer_logprobs, strict=True)):
        trained = np.asarray(values, dtype=np.float64).ravel()
        if trained.size != len(datum):
            raise ValueError(
                f"datum {index}: {trained.size} trainer logprobs for {len(datum)} targets"
            )
        where = datum.mask > 0
        old.append(np.asarray(datum.logprobs, dtype=np.float64)[where])
        new.append(trained[where])
    if not old:
        return None
    return logprob_mismatch(np.concatenate(old), np.concatenate(new))


def merge_mismatch(parts: Sequence[LogprobMismatch | None]) -> LogprobMismatch | None:
    """The mismatch of the union of several batches' tokens (token-weighted KL, largest
    difference); None when no part reported one."""
    known = [p for p in parts if p is not None and p.tokens > 0]
    if not known:
        return None
    tokens = sum(p.tokens for p in known)
    return LogprobMismatch(
        sampler_kl=sum(p.sampler_kl * p.tokens for p in known) / tokens,
        max_abs_diff=max(p.max_abs_diff for p in known),
        tokens=tokens,
    )
