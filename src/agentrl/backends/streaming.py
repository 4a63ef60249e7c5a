"""One batch's gradient from several `forward_backward` calls (streaming within an update).

With `--stream-groups` the trainer hands each group to training as soon as its rollout ends,
while the rest of the batch is still being played, and takes ONE optimizer step at the end.
That step must see the gradient of the whole batch as if it had been one call, and a plain
second `forward_backward` does not give that wherever a call divides by its own totals (the
local backend's trained tokens or datums, pytrio's batch plan). So streaming goes through a
`GradientStream`, opened per update by a backend that can make the parts add up exactly:

    stream = open_stream(backend, loss, config)   # StreamingUnsupportedError if it cannot
    await stream.add(datums_of_group_1)           # any number of parts, one at a time
    await stream.add(datums_of_groups_2_and_3)
    result = await stream.finish()                # the whole batch's result; then optim_step

What each backend does (see docs/losses-and-offpolicy.md):

- local: every part accumulates *unnormalised* gradients (the summed loss); `finish` divides
  the accumulated gradients by `agentrl.algo.losses.loss_divisor` of the whole batch (its trained
  tokens, its datums, or the constant) before the step: the same gradient up to float
  rounding (`LocalGradientStream`).
- tinker: its losses are sums over target tokens with no per-call divisor, so calls before one
  `optim_step` add up as they are (`SummedStream`).
- pytrio: each call is normalised by the totals of that call (`gradient_accumulation` of its
  batch plan), which a later call cannot undo: refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentrl.algo.datums import Datum
from agentrl.algo.mismatch import merge_mismatch
from agentrl.backends.base import ForwardBackwardResult, LossConfig, LossName, TrainingBackend

__all__ = [
    "GradientStream",
    "StreamingBackend",
    "StreamingUnsupportedError",
    "SummedStream",
    "merge_results",
    "open_stream",
]

SUMMED_METRICS = frozenset({"loss_sum", "micro_batches", "datums", "retried", "recovered"})
"""Backend metrics that are counts or sums: added over the parts (so are keys ending ':sum')."""


class StreamingUnsupportedError(ValueError):
    """The backend cannot assemble one batch's gradient from several calls exactly."""


class GradientStream(Protocol):
    """The gradient of one batch, accumulated part by part; nothing is applied until the
    trainer's `optim_step` after `finish`."""

    async def add(self, datums: Sequence[Datum]) -> ForwardBackwardResult:
        """Accumulate the gradient of one part of the batch (parts are added one at a time)."""
        ...

    async def finish(self) -> ForwardBackwardResult:
        """Make the accumulated gradient the whole batch's; its result (loss, tokens, metrics,
        mismatch) as one call over every part would have reported it."""
        ...

    async def abort(self) -> None:
        """Drop what the parts accumulated where the backend can (local: zero the
        gradients); a remote service keeps them until its next `optim_step`."""
        ...


@runtime_checkable
class StreamingBackend(Protocol):
    """A `TrainingBackend` that can stream one batch's gradient over several calls."""

    def open_stream(self, loss: LossName, config: LossConfig) -> GradientStream:
        """A stream for one batch of `loss` (no work until its first `add`); raises
        `StreamingUnsupportedError` where the parts would not add up exactly."""
        ...


def open_stream(backend: TrainingBackend, loss: LossName, config: LossConfig) -> GradientStream:
    """`backend.open_stream(loss, config)`, or StreamingUnsupportedError naming the fix."""
    if not isinstance(backend, StreamingBackend):
        raise StreamingUnsupportedError(
            f"stream_groups (--stream-groups) needs a backend that can assemble one batch's "
            f"gradient from several forward_backward calls; {type(backend).__name__} has no "
            "open_stream (see agentrl.backends.streaming): turn streaming off"
        )
    return backend.open_stream(loss, config)


def _merged_metrics(parts: Sequence[ForwardBackwardResult]) -> dict[str, float]:
    """Counts and sums added, ':max' / ':min' keys reduced, the rest token-weighted means."""
    keys = dict.fromkeys(k for p in parts for k in p.metrics)
    merged: dict[str, float] = {}
    for key in keys:
        values = [(p.metrics[key], p.num_tokens) for p in parts if key in p.metrics]
        if key in SUMMED_METRICS or key.endswith(":sum"):
            merged[key] = sum(v for v, _ in values)
        elif key.endswith(":max"):
            merged[key] = max(v for v, _ in values)
        elif key.endswith(":min"):
            merged[key] = min(v for v, _ in values)
        else:
            weight = sum(n for _, n in values)
            merged[key] = (
                sum(v * n for v, n in values) / weight
                if weight
                else sum(v for v, _ in values) / len(values)
            )
    merged["parts"] = float(len(parts))
    return merged


def merge_results(
    parts: Sequence[ForwardBackwardResult], *, loss: float | None = None
) -> ForwardBackwardResult:
    """One result for the parts of a batch: tokens added, metrics merged (`_merged_metrics`,
    plus `parts`), mismatch over every token; `loss` defaults to the token-weighted mean of
    the parts' losses (right where each part's loss is its mean per trained token)."""
    if not parts:
        raise ValueError("a stream with no part has no result")
    tokens = sum(p.num_tokens for p in parts)
    if loss is None:
        loss = (
            sum(p.loss * p.num_tokens for p in parts) / tokens
            if tokens
            else sum(p.loss for p in parts) / len(parts)
        )
    return ForwardBackwardResult(
        loss=loss,
        num_tokens=tokens,
        metrics=_merged_metrics(parts),
        mismatch=merge_mismatch([p.mismatch for p in parts]),
    )


class SummedStream:
    """The stream of a backend whose `forward_backward` calls before one `optim_step` already
    add up to the whole batch's gradient (its losses are sums: tinker, simulations)."""

    def __init__(self, backend: TrainingBackend, loss: LossName, config: LossConfig) -> None:
        self.backend = backend
        self.loss = LossName(loss)
        self.config = config
        self.parts: list[ForwardBackwardResult] = []

    async def add(self, datums: Sequence[Datum]) -> ForwardBackwardResult:
        """One `forward_backward` call for this part."""
        part = await self.backend.forward_backward(datums, self.loss, self.config)
        self.parts.append(part)
        return part

    async def finish(self) -> ForwardBackwardResult:
        """The merged result (the gradients need no rescale)."""
        return merge_results(self.parts)

    async def abort(self) -> None:
        """Nothing can be taken back: the service keeps the parts' gradients."""
