"""Learning-rate schedules over a run's updates (pure math; the Trainer applies them).

`scheduled_learning_rate(schedule, base, final, update, total)` is the rate of update
`update` (1-based) of `total`: `base` at update 1 and `final` at update `total`, in between

    constant:  base                                       (final is ignored)
    linear:    base + (final - base) * f
    cosine:    final + (base - final) * (1 + cos(pi * f)) / 2

with `f = (update - 1) / (total - 1)` (0 at the first update, 1 at the last; `f = 0` for a
one-update run), clamped to [0, 1] so that updates past `total` keep `final`. With `warmup`
W > 0 the rate is then multiplied by `min(1, update / W)`: it rises linearly over the first W
updates (base / W at update 1), so that the optimizer's first steps on a new objective (RL
after a supervised warm start, with Adam's moments still the warm start's) stay small.
"""

from __future__ import annotations

import math
from enum import StrEnum

__all__ = ["LRSchedule", "scheduled_learning_rate"]


class LRSchedule(StrEnum):
    """How the learning rate moves from its base to its final value over the updates."""

    CONSTANT = "constant"
    LINEAR = "linear"
    COSINE = "cosine"


def scheduled_learning_rate(
    schedule: LRSchedule | str,
    base: float,
    final: float,
    update: int,
    total: int,
    warmup: int = 0,
) -> float:
    """The learning rate of update `update` (1-based) of `total`, after `warmup` updates of
    linear warmup (see the module docstring)."""
    if total < 1 or update < 1:
        raise ValueError(f"update and total must be >= 1, got update={update} total={total}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    warm = min(1.0, update / warmup) if warmup else 1.0
    return warm * _scheduled(LRSchedule(schedule), base, final, update, total)


def _scheduled(schedule: LRSchedule, base: float, final: float, update: int, total: int) -> float:
    if schedule is LRSchedule.CONSTANT:
        return base
    f = 0.0 if total == 1 else min(1.0, (update - 1) / (total - 1))
    if schedule is LRSchedule.LINEAR:
        return base + (final - base) * f
    return final + (base - final) * (1.0 + math.cos(math.pi * f)) / 2.0
