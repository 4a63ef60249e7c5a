"""`LocalGradientStream`: one batch's gradient from parts, rescaled once at the end.

`run_forward_backward` divides every micro-batch's summed loss by the divisor of its call
(`agentrl.algo.losses.loss_divisor`). A streamed batch cannot know the whole batch's divisor when
its first part arrives, so each part is run with `normalisation="sum"` (divisor 1: the
gradient of `sum_t mask_t * c_t * l_t`, with `c_t = 1 / |datum|` under `sequence`), its trained
tokens and datums are counted, and `finish` divides the accumulated gradients by
`loss_divisor(config, all tokens, all datums)` before the optimizer step. The step then sees

    sum over parts of grad(sum_t c_t l_t) / D  ==  grad(sum over the batch of c_t l_t) / D

i.e. the gradient of one call over the whole batch, up to float rounding (tested). On several
ranks each part's gradients are summed over them when the part ends, so `finish` divides the
same (whole-batch) sums on every rank.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import torch

from agentrl.algo.datums import Datum
from agentrl.algo.losses import loss_divisor
from agentrl.backends.base import ForwardBackwardResult, LossConfig, LossName
from agentrl.backends.local.distributed import DistributedContext
from agentrl.backends.local.engine import ModelEngine
from agentrl.backends.local.training import Normalisation, batch_totals, run_forward_backward
from agentrl.backends.streaming import merge_results

__all__ = ["LocalGradientStream", "StreamTarget"]


class StreamTarget(Protocol):
    """What a gradient stream needs of its backend (`LocalBackend` is one)."""

    engine: ModelEngine
    micro_batch_tokens: int
    normalisation: Normalisation
    distributed: DistributedContext | None
    """Several ranks: each part is sharded and its gradients summed over them."""

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer steps (their gradients are rescaled at `finish`)."""
        ...


class LocalGradientStream:
    """The `GradientStream` of a `LocalBackend` (see the module docstring)."""

    def __init__(self, backend: StreamTarget, loss: LossName, config: LossConfig) -> None:
        self.backend = backend
        self.loss = LossName(loss)
        self.config = config
        self.parts: list[ForwardBackwardResult] = []
        self.tokens = 0.0
        """Trained tokens of the parts so far."""
        self.sequences = 0
        """Datums with a trained token so far."""
        self._finished = False

    async def add(self, datums: Sequence[Datum]) -> ForwardBackwardResult:
        """Accumulate the summed-loss gradient of `datums` (no divisor yet)."""
        return await asyncio.to_thread(self._add, list(datums))

    def _add(self, datums: list[Datum]) -> ForwardBackwardResult:
        if self._finished:
            raise RuntimeError("this gradient stream is finished; open a new one per batch")
        engine = self.backend.engine
        distributed = self.backend.distributed
        replaced: bool | None = None
        if distributed is not None:  # count what every rank trains on (rank 0's if they differ)
            datums, replaced = distributed.agreed_datums(
                datums, str(self.loss), repr(self.config), "sum"
            )
        with engine.lock:
            if not self.parts:
                self._refuse_stale_gradients()
            part = run_forward_backward(
                engine,
                datums,
                self.loss,
                self.config,
                micro_batch_tokens=self.backend.micro_batch_tokens,
                normalisation="sum",
                distributed=distributed,
                agreed=replaced,
            )
        tokens, sequences = batch_totals(datums)
        self.tokens += tokens
        self.sequences += sequences
        self.parts.append(part)
        return part

    def _refuse_stale_gradients(self) -> None:
        """A stream is one batch's whole gradient: `finish` divides what the parameters hold,
        so gradients an earlier `forward_backward` left without an optimizer step would be
        divided (and stepped) with this batch."""
        stale = [p for p in self.backend.trainable_parameters() if p.grad is not None]
        if stale and any(bool(p.grad.abs().sum() > 0) for p in stale if p.grad is not None):
            raise RuntimeError(
                "the parameters hold gradients of an earlier forward_backward that no "
                "optim_step used; step or discard them (optim_step, or abort() of its stream) "
                "before streaming a new batch"
            )

    def divisor(self) -> float:
        """The whole batch's divisor (1 for a backend built with `normalisation="sum"`)."""
        if self.backend.normalisation != "tokens":
            return 1.0
        return loss_divisor(self.config, self.tokens, self.sequences)

    async def finish(self) -> ForwardBackwardResult:
        """Divide the accumulated gradients by the batch's divisor; the batch's result."""
        return await asyncio.to_thread(self._finish)

    def _finish(self) -> ForwardBackwardResult:
        if self._finished or not self.parts:
            raise RuntimeError("finish() needs an open stream with at least one part")
        self._finished = True
        divisor = self.divisor()
        with self.backend.engine.lock:
            for param in self.backend.trainable_parameters():
                if param.grad is not None:
                    param.grad.div_(divisor)
        loss_sum = sum(p.metrics["loss_sum"] for p in self.parts)
        return merge_results(self.parts, loss=loss_sum / divisor)

    async def abort(self) -> None:
        """Zero the gradients the parts accumulated (the weights never changed)."""
        await asyncio.to_thread(self._abort)

    def _abort(self) -> None:
        self._finished = True
        with self.backend.engine.lock:
            self.backend.engine.model.zero_grad(set_to_none=True)
