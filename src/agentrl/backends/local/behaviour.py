"""`--behaviour-logprobs trainer`: the PPO ratio divides by the trainer's own logprobs.

By default the behaviour logprobs of PPO are the sampler's (`Datum.logprobs`, as sampled). When
the sampler is another engine (vLLM, bf16 kernels, another attention implementation) its
logprobs differ from the trainer's by numerics, and the ratio `p_train / p_sample` is not 1 on
the first step even though the weights are the same. With `trainer`, the training backend
recomputes the logprobs of the sampled tokens with the weights before the update (one extra
forward pass, no gradient) and PPO uses those; the sampler-vs-trainer mismatch is still
measured and reported against the sampler's logprobs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from agentrl.algo.datums import Datum
from agentrl.algo.mismatch import LogprobMismatch, datum_mismatch, merge_mismatch
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    Sampler,
    TrainingBackend,
)
from agentrl.backends.local.engine import ModelEngine
from agentrl.backends.streaming import GradientStream, open_stream

__all__ = ["TrainerBehaviour", "trainer_logprobs", "with_logprobs"]


def trainer_logprobs(engine: ModelEngine, datums: Sequence[Datum]) -> list[npt.NDArray[np.float32]]:
    """The model's logprob of every target token of each datum (no gradient)."""
    out: list[npt.NDArray[np.float32]] = []
    for datum in datums:
        tokens = [*datum.model_input.tolist(), int(datum.target_tokens[-1])]
        out.append(engine.sequence_logprobs(tokens).numpy().astype(np.float32))
    return out


def with_logprobs(
    datums: Sequence[Datum], logprobs: Sequence[npt.NDArray[np.float32]]
) -> list[Datum]:
    """The datums with their behaviour logprobs replaced (same tokens, advantages, mask)."""
    if len(datums) != len(logprobs):
        raise ValueError(f"{len(logprobs)} logprob arrays for {len(datums)} datums")
    return [
        replace(d, logprobs=np.asarray(lp, dtype=np.float32))
        for d, lp in zip(datums, logprobs, strict=True)
    ]


class TrainerBehaviour:
    """A `TrainingBackend` whose PPO behaviour logprobs are recomputed by the trainer.

    Wraps a backend over a local `ModelEngine` (the local backend, alone or behind the vLLM
    sampler); everything but `forward_backward` is passed through."""

    def __init__(self, inner: TrainingBackend, engine: ModelEngine) -> None:
        self.inner = inner
        self.engine = engine

    async def sampler(self) -> Sampler:
        """The inner backend's sampler."""
        return await self.inner.sampler()

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Recompute the behaviour logprobs, then the inner forward/backward on them; the
        reported mismatch compares the sampler's logprobs with the recomputed ones."""
        recomputed = await asyncio.to_thread(trainer_logprobs, self.engine, datums)
        mismatch = datum_mismatch(datums, recomputed)
        result = await self.inner.forward_backward(with_logprobs(datums, recomputed), loss, config)
        return replace(result, mismatch=mismatch)

    def open_stream(self, loss: LossName, config: LossConfig) -> GradientStream:
        """The inner backend's gradient stream, each part's behaviour logprobs recomputed."""
        return _BehaviourStream(open_stream(self.inner, loss, config), self.engine)

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
        """Close the inner backend (e.g. its vLLM engine)."""
        await self.inner.close()


class _BehaviourStream:
    """A `GradientStream` whose parts train on trainer-recomputed behaviour logprobs; the
    mismatch reported compares them with the sampler's, over every part."""

    def __init__(self, inner: GradientStream, engine: ModelEngine) -> None:
        self.inner = inner
        self.engine = engine
        self.mismatches: list[LogprobMismatch | None] = []

    async def add(self, datums: Sequence[Datum]) -> ForwardBackwardResult:
        """Recompute the part's behaviour logprobs, then the inner part on them."""
        recomputed = await asyncio.to_thread(trainer_logprobs, self.engine, datums)
        mismatch = datum_mismatch(datums, recomputed)
        self.mismatches.append(mismatch)
        part = await self.inner.add(with_logprobs(datums, recomputed))
        return replace(part, mismatch=mismatch)

    async def finish(self) -> ForwardBackwardResult:
        """The inner result with the sampler-vs-trainer mismatch of every part."""
        result = await self.inner.finish()
        return replace(result, mismatch=merge_mismatch(self.mismatches))

    async def abort(self) -> None:
        """The inner abort."""
        await self.inner.abort()
