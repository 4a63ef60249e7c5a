"""`RecordingBackend`: a `TrainingBackend` that passes every call to a real one and keeps a
copy of the datums of each `forward_backward` call, so a test or benchmark can compare what
two runs trained (`same_datums`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    Sampler,
    TrainingBackend,
)

__all__ = ["RecordingBackend", "same_datums"]


class RecordingBackend:
    """`inner`, recording the datums of every `forward_backward` call in `datums`."""

    def __init__(self, inner: TrainingBackend) -> None:
        self.inner = inner
        self.datums: list[list[Datum]] = []

    async def sampler(self) -> Sampler:
        """The inner backend's sampler."""
        return await self.inner.sampler()

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Record `datums`, then the inner call."""
        self.datums.append(list(datums))
        return await self.inner.forward_backward(datums, loss, config)

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """The inner optimizer step."""
        return await self.inner.optim_step(adam)

    async def save(self, name: str) -> CheckpointRef:
        """The inner save."""
        return await self.inner.save(name)

    async def load(self, ref: CheckpointRef) -> None:
        """The inner load."""
        await self.inner.load(ref)

    async def close(self) -> None:
        """Close the inner backend."""
        await self.inner.close()


def same_datums(a: Sequence[Datum], b: Sequence[Datum]) -> bool:
    """Whether two lists of datums are equal, array by array and in order."""
    if len(a) != len(b):
        return False
    fields = ("model_input", "target_tokens", "logprobs", "advantages", "mask")
    return all(
        x.sequence == y.sequence
        and all(np.array_equal(getattr(x, f), getattr(y, f)) for f in fields)
        for x, y in zip(a, b, strict=True)
    )
