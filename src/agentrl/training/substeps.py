"""Several optimizer steps per update: the batch's datums in consecutive parts of whole
trajectories (`TrainConfig.optim_substeps`), one `forward_backward` and one `optim_step`
each, as tinker-cookbook's `num_substeps` and verl's PPO mini-batches do.

The samples are the update's either way; what changes is how many optimizer steps they buy.
The first part is trained by the weights that sampled it; later parts by weights one or more
steps newer, which the importance ratio of PPO / importance sampling accounts for (it compares
the sampler's logprobs with the current weights'), so the sampler-mismatch report is the first
part's (the only one whose weights equal the sampler's).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from agentrl.algo.datums import Datum, sequence_index
from agentrl.backends.base import ForwardBackwardResult

__all__ = ["SUMMED_METRICS", "merge_results", "run_substeps", "substep_parts"]

SUMMED_METRICS = frozenset({"loss_sum", "micro_batches", "datums"})
"""Backend metrics that are counts or sums: added over the parts (the rest are averaged,
weighted by each part's trained tokens)."""


def substep_parts(datums: Sequence[Datum], parts: int) -> list[list[Datum]]:
    """`datums` in at most `parts` consecutive runs of whole trajectories (the segments of one
    trajectory, `sequence_index`, stay together), as equal in datum count as the
    trajectories allow; empty parts are left out. Deterministic: a function of the order."""
    if parts < 1:
        raise ValueError(f"optim_substeps must be >= 1, got {parts}")
    units: list[list[Datum]] = []
    owners = sequence_index(datums)
    for i, datum in enumerate(datums):
        if units and owners[i] == owners[i - 1]:
            units[-1].append(datum)
        else:
            units.append([datum])
    count = min(parts, len(units))
    out: list[list[Datum]] = []
    start = 0
    for index in range(count):
        end = round(len(units) * (index + 1) / count)
        out.append([d for unit in units[start:end] for d in unit])
        start = end
    return [part for part in out if part]


def merge_results(results: Sequence[ForwardBackwardResult]) -> ForwardBackwardResult:
    """One report for the parts of an update: loss and metrics averaged by trained tokens
    (`SUMMED_METRICS` added), tokens added, the first part's sampler mismatch."""
    if not results:
        raise ValueError("no forward_backward results to merge")
    if len(results) == 1:
        return results[0]
    tokens = sum(r.num_tokens for r in results)
    weights = [r.num_tokens / tokens if tokens else 1.0 / len(results) for r in results]
    keys = dict.fromkeys(k for r in results for k in r.metrics)
    metrics: dict[str, float] = {}
    for key in keys:
        values = [
            (w, r.metrics[key]) for w, r in zip(weights, results, strict=True) if key in r.metrics
        ]
        if key in SUMMED_METRICS:
            metrics[key] = float(sum(v for _, v in values))
        else:
            total = sum(w for w, _ in values)
            metrics[key] = float(sum(w * v for w, v in values) / total) if total else 0.0
    metrics["substeps"] = float(len(results))
    return ForwardBackwardResult(
        loss=float(sum(w * r.loss for w, r in zip(weights, results, strict=True))),
        num_tokens=tokens,
        metrics=metrics,
        mismatch=results[0].mismatch,
    )


async def run_substeps(
    datums: Sequence[Datum],
    parts: int,
    forward_backward: Callable[[list[Datum]], Awaitable[ForwardBackwardResult]],
    optim_step: Callable[[], Awaitable[Mapping[str, float]]],
) -> tuple[ForwardBackwardResult, dict[str, float], float, float]:
    """`forward_backward` then `optim_step` on each part of `datums` (`substep_parts`);
    returns the merged result, the last step's optimizer metrics, and the seconds spent in
    forward_backward and in optim_step."""
    results: list[ForwardBackwardResult] = []
    optim: dict[str, float] = {}
    fb_seconds = optim_seconds = 0.0
    for part in substep_parts(datums, parts):
        clock = time.perf_counter()
        results.append(await forward_backward(part))
        fb_seconds += time.perf_counter() - clock
        clock = time.perf_counter()
        optim = dict(await optim_step())
        optim_seconds += time.perf_counter() - clock
    return merge_results(results), optim, fb_seconds, optim_seconds
