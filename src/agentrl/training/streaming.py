"""Streaming within an update (`--stream-groups`): each group trained as soon as it is played.

For every group whose rollout finishes (`GroupSource.take(..., on_group=streamer.on_group)`
hands it over already scored, `ScoredGroup`; the estimator must be group-local:
`agentrl.algo.advantages.is_group_local`): its datums (`scored_datums`, the function
whole-batch training uses) and, unless the group is degenerate (dynamic sampling may still
replace it; it has no datum anyway), a part of the update's `GradientStream`
(`agentrl.backends.streaming`), run in the background while the other groups are still being
played. Parts run one at a time; groups that finish while a part runs go into the next part
together. When the rollout is over, `finish(scored)` adds what was not streamed yet (degenerate
groups kept, replacements that came in last), waits for the last part and finishes the stream:
the backend makes the accumulated gradient the whole batch's, and the trainer takes ONE
optimizer step, as without streaming. A plain `TrajectoryGroup` given to `on_group` or
`finish` (a caller without a group source) is scored by the streamer's own estimator.

Seconds (`StreamedBatch`): `forward_backward` is the time spent in parts and in the stream's
finish; `overlap` is the part of it that ran before the last group finished, i.e. training
hidden behind rollouts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agentrl.algo.advantages import (
    AdvantageEstimator,
    Advantages,
    ScoredGroup,
    advantages_of,
    is_group_local,
    score_groups,
)
from agentrl.algo.datums import Datum, scored_datums
from agentrl.backends.base import ForwardBackwardResult, LossConfig, LossName, TrainingBackend
from agentrl.backends.streaming import GradientStream, open_stream
from agentrl.core.types import TrajectoryGroup

__all__ = ["GroupStreamer", "StreamedBatch", "check_streaming", "finish_streamed", "open_streamer"]


def check_streaming(
    backend: TrainingBackend, estimator: AdvantageEstimator, loss: LossName, config: LossConfig
) -> None:
    """Refuse, before any rollout, streaming that would not give the whole batch's gradient:
    an estimator that is not group-local, a backend whose calls do not add up."""
    if not is_group_local(estimator):
        raise ValueError(
            f"stream_groups (--stream-groups) estimates each group's advantages alone, but "
            f"{type(estimator).__name__} does not declare group_local = True (its advantages "
            "may depend on the whole batch); set group_local = True on it if a group's "
            "advantages depend only on that group, or turn streaming off"
        )
    open_stream(backend, loss, config)  # StreamingUnsupportedError naming the fix


@dataclass(frozen=True)
class StreamedBatch:
    """What a streamed update trained, and when."""

    advantages: Advantages
    """The estimator's answer for the update's final groups, in their order."""
    result: ForwardBackwardResult | None
    """The whole batch's result (None: no datum, no optimizer step)."""
    forward_backward_seconds: float
    """Seconds in forward_backward parts and in the stream's finish."""
    overlap_seconds: float
    """Seconds of forward_backward that ran before the last group finished."""
    advantages_seconds: float
    """Seconds building datums (and scoring plain groups) during and after the rollout."""

    def timings(self) -> dict[str, float]:
        """The update's timings of this batch (`UpdateMetrics.timings`)."""
        return {
            "advantages": self.advantages_seconds,
            "forward_backward": self.forward_backward_seconds,
            "stream_overlap": self.overlap_seconds,
        }


class GroupStreamer:
    """Feeds one update's groups to a `GradientStream` as they finish (module docstring)."""

    def __init__(
        self,
        stream: GradientStream,
        estimator: AdvantageEstimator | None = None,
        *,
        keep_zero_advantage: bool = False,
    ) -> None:
        self.stream = stream
        self.estimator = estimator
        self.keep_zero_advantage = keep_zero_advantage
        """Train zero-advantage trajectories too (a KL penalty: `scored_datums`)."""
        """Scores plain groups only; scored groups keep the advantages they came with."""
        self.parts = 0
        """Parts sent so far."""
        self._streamed: dict[int, ScoredGroup] = {}
        self._pending: list[Datum] = []
        self._worker: asyncio.Task[None] | None = None
        self._failed: Exception | None = None
        self._spans: list[tuple[float, float]] = []
        self._running_since: float | None = None
        self._advantage_seconds = 0.0

    def _scored(self, group: TrajectoryGroup | ScoredGroup) -> ScoredGroup:
        if isinstance(group, ScoredGroup):
            return group
        if self.estimator is None:
            raise ValueError("a plain TrajectoryGroup needs a streamer with an estimator")
        (scored,) = score_groups(self.estimator, [group])
        return scored

    def on_group(self, group: TrajectoryGroup | ScoredGroup) -> None:
        """A group finished: unless degenerate, stream its datums."""
        clock = time.perf_counter()
        scored = self._scored(group)
        if not scored.degenerate:
            self._streamed[id(scored.group)] = scored
            self._push(self._datums(scored))
        self._advantage_seconds += time.perf_counter() - clock

    def _datums(self, scored: ScoredGroup) -> list[Datum]:
        return scored_datums([scored], keep_zero_advantage=self.keep_zero_advantage)

    def _push(self, datums: Sequence[Datum]) -> None:
        if not datums:
            return
        self._pending.extend(datums)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        """Send what is pending, one part at a time, until nothing is left."""
        while self._pending and self._failed is None:
            batch, self._pending = self._pending, []
            started = self._running_since = time.perf_counter()
            try:
                await self.stream.add(batch)
            except Exception as exc:  # raised by finish(), which the trainer awaits
                self._failed = exc
            finally:
                self._spans.append((started, time.perf_counter()))
                self._running_since = None
            self.parts += 1

    def _overlap(self, rollout_end: float) -> float:
        done = sum(max(0.0, min(end, rollout_end) - start) for start, end in self._spans)
        running = self._running_since
        return done + (max(0.0, rollout_end - running) if running is not None else 0.0)

    async def finish(self, groups: Sequence[TrajectoryGroup | ScoredGroup]) -> StreamedBatch:
        """The rollout is over and `groups` are the update's: train what is left, finish the
        stream. Raises what a part raised, and RuntimeError if a streamed group was dropped."""
        rollout_end = time.perf_counter()
        overlap = self._overlap(rollout_end)
        kept = {id(g.group if isinstance(g, ScoredGroup) else g) for g in groups}
        lost = [s.group.group_id for key, s in self._streamed.items() if key not in kept]
        if lost:
            raise RuntimeError(
                f"groups {lost} were already trained (streamed) but are not in the update's "
                "batch; only degenerate groups may be replaced while streaming"
            )
        clock = time.perf_counter()
        batch: list[ScoredGroup] = []
        for group in groups:
            plain = group.group if isinstance(group, ScoredGroup) else group
            known = self._streamed.get(id(plain))
            if known is not None:
                batch.append(known)
                continue
            scored = self._scored(group)
            batch.append(scored)
            self._push(self._datums(scored))
        self._advantage_seconds += time.perf_counter() - clock
        if self._worker is not None:
            await self._worker
        if self._failed is not None:
            raise self._failed
        seconds = sum(end - start for start, end in self._spans)
        result = None
        if self.parts:
            clock = time.perf_counter()
            result = await self.stream.finish()
            seconds += time.perf_counter() - clock
        return StreamedBatch(
            advantages=advantages_of(batch),
            result=result,
            forward_backward_seconds=seconds,
            overlap_seconds=overlap,
            advantages_seconds=self._advantage_seconds,
        )

    async def abort(self) -> None:
        """Stop streaming (the update failed or was cancelled) and drop the accumulated
        gradients where the backend can (`GradientStream.abort`)."""
        self._pending = []
        worker = self._worker
        if worker is not None and not worker.done():
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        await self.stream.abort()


def open_streamer(
    backend: TrainingBackend,
    estimator: AdvantageEstimator | None,
    loss: LossName,
    config: LossConfig,
) -> GroupStreamer:
    """A streamer of one update's (scored) groups into a fresh gradient stream of `backend`."""
    return GroupStreamer(
        open_stream(backend, loss, config), estimator, keep_zero_advantage=config.needs_every_token
    )


async def finish_streamed(
    streamer: GroupStreamer, groups: Sequence[TrajectoryGroup | ScoredGroup]
) -> StreamedBatch:
    """`streamer.finish(groups)`; on any failure the stream is aborted first, so no
    half-batch gradient is left for a later step."""
    try:
        return await streamer.finish(groups)
    except BaseException:
        await streamer.abort()
        raise
