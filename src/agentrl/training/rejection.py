"""Rejection-sampling fine-tuning (RFT, expert iteration) in the update loop: play K per task
with the current policy, keep the trajectories a filter accepts (default: the won ones), and
train cross entropy on their assistant tokens; repeat every update.

`Trainer(rejection=RejectionSampling(keep=...))` (the CLI: `agentrl rft`, or `agentrl train
--objective rft`). The update's metrics gain `rft/kept` (trajectories trained) and
`rft/kept_fraction`; an update that keeps none takes no optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrl.algo.datums import Datum, kept_datums
from agentrl.core.types import Trajectory, TrajectoryGroup

__all__ = ["RejectedBatch", "RejectionSampling", "rejection_batch", "won"]


def won(trajectory: Trajectory) -> bool:
    """The default filter: the episode was won."""
    return trajectory.won


@dataclass(frozen=True)
class RejectionSampling:
    """Which trajectories rejection-sampling fine-tuning trains on."""

    keep: Callable[[Trajectory], bool] = won
    """The filter: True keeps a trajectory (every assistant token, weight 1)."""


@dataclass(frozen=True)
class RejectedBatch:
    """The datums of the kept trajectories and how many were kept."""

    datums: list[Datum]
    kept: int
    played: int

    def scalars(self) -> dict[str, float]:
        """The update's `rft/*` metrics."""
        fraction = self.kept / self.played if self.played else 0.0
        return {"rft/kept": float(self.kept), "rft/kept_fraction": fraction}


def rejection_batch(
    groups: Sequence[TrajectoryGroup], rejection: RejectionSampling
) -> RejectedBatch:
    """The supervised datums of the trajectories of `groups` that `rejection.keep` accepts."""
    played = [t for g in groups for t in g.trajectories if t.turns]
    chosen = {id(t) for t in played if rejection.keep(t)}  # the filter is asked once each
    datums = kept_datums(groups, lambda t: id(t) in chosen)
    return RejectedBatch(datums, len(chosen), len(played))
