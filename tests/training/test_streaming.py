"""`GroupStreamer` without a model: which groups are streamed when, how parts are formed, how
it composes with dynamic sampling, failures, and the config's refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import ValidationError

from agentrl.advantages import GiGPO, GroupMean, GroupNormalized, LeaveOneOut, is_group_local
from agentrl.backends.base import ForwardBackwardResult
from agentrl.backends.mismatch import LogprobMismatch
from agentrl.backends.streaming import merge_results
from agentrl.config import TrainConfig
from agentrl.datums import Datum, build_datums
from agentrl.streaming import GroupStreamer
from agentrl.testing import synthetic_group
from tests.training.test_pipeline import FakeRollouts, source


class RecordingStream:
    """A `GradientStream` that records its parts; `fail_at` makes that part raise."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.parts: list[list[Datum]] = []
        self.fail_at = fail_at
        self.finished = self.aborted = False
        self.release = asyncio.Event()
        self.release.set()

    async def add(self, datums: Sequence[Datum]) -> ForwardBackwardResult:
        await self.release.wait()
        if len(self.parts) == self.fail_at:
            raise RuntimeError("part failed")
        self.parts.append(list(datums))
        tokens = sum(d.num_assistant_tokens for d in datums)
        return ForwardBackwardResult(loss=1.0, num_tokens=tokens)

    async def finish(self) -> ForwardBackwardResult:
        self.finished = True
        return ForwardBackwardResult(loss=1.0, num_tokens=sum(len(p) for p in self.parts))

    async def abort(self) -> None:
        self.aborted = True


def _adv(datums: Sequence[Datum]) -> list[float]:
    return sorted(float(d.advantages[d.mask > 0][0]) for d in datums)


async def test_groups_stream_as_they_finish_and_pile_up_while_a_part_runs() -> None:
    stream = RecordingStream()
    stream.release.clear()  # the first part blocks until released
    streamer = GroupStreamer(stream, GroupMean())
    a, d, b, c = (
        synthetic_group([1.0, 0.0], group_id="a"),
        synthetic_group([0.0, 0.0], group_id="d"),  # degenerate: held back
        synthetic_group([2.0, 0.0, 1.0], group_id="b"),
        synthetic_group([0.5, 0.0], group_id="c"),
    )
    streamer.on_group(a)
    await asyncio.sleep(0)  # the first part (a) has started and waits
    streamer.on_group(d)
    streamer.on_group(b)
    streamer.on_group(c)
    stream.release.set()
    batch = await streamer.finish([a, d, b, c])
    assert [len(p) for p in stream.parts] == [2, 4]  # a alone, then b (one has A = 0) and c
    assert stream.finished and streamer.parts == 2
    expected = GroupMean().estimate([a, d, b, c])
    assert batch.advantages == expected  # per-group estimates == the batch estimate
    assert _adv([x for p in stream.parts for x in p]) == _adv(build_datums([a, d, b, c], expected))
    assert batch.result is not None and batch.overlap_seconds >= 0.0


async def test_dynamic_sampling_replacements_are_streamed_and_nothing_trains_twice() -> None:
    rollouts = FakeRollouts()
    src = source(rollouts, {1: ["a", "d1", "b", "d2"]}, dynamic_budget=3)
    stream = RecordingStream()
    streamer = GroupStreamer(stream, GroupMean())
    taken = await src.take(1, 0, on_group=streamer.on_group)
    assert [g.group_id for g in taken.groups] == ["a", "x0", "b", "x1"]
    batch = await streamer.finish(taken.groups)
    streamed = [d for part in stream.parts for d in part]
    assert len(streamed) == len(build_datums(taken.groups, batch.advantages)) == 8
    assert batch.advantages == GroupMean().estimate(taken.groups)


async def test_no_datum_means_no_part_and_no_step() -> None:
    stream = RecordingStream()
    streamer = GroupStreamer(stream, GroupMean())
    groups = [synthetic_group([0.0, 0.0], group_id="d")]
    streamer.on_group(groups[0])
    batch = await streamer.finish(groups)
    assert batch.result is None and stream.parts == [] and not stream.finished
    assert batch.advantages.degenerate_groups == 1


async def test_a_failed_part_is_raised_by_finish() -> None:
    stream = RecordingStream(fail_at=0)
    streamer = GroupStreamer(stream, GroupMean())
    group = synthetic_group([1.0, 0.0], group_id="a")
    streamer.on_group(group)
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="part failed"):
        await streamer.finish([group])
    assert not stream.finished


async def test_a_streamed_group_missing_from_the_batch_is_an_error() -> None:
    streamer = GroupStreamer(RecordingStream(), GroupMean())
    group = synthetic_group([1.0, 0.0], group_id="a")
    streamer.on_group(group)
    with pytest.raises(RuntimeError, match=r"\['a'\] were already trained"):
        await streamer.finish([synthetic_group([1.0, 0.0], group_id="other")])


async def test_abort_stops_the_running_part_and_aborts_the_stream() -> None:
    stream = RecordingStream()
    stream.release.clear()
    streamer = GroupStreamer(stream, GroupMean())
    streamer.on_group(synthetic_group([1.0, 0.0], group_id="a"))
    await asyncio.sleep(0)
    await streamer.abort()
    assert stream.aborted and stream.parts == []


def test_built_in_estimators_are_group_local() -> None:
    for estimator in (GroupMean(), GroupNormalized(), LeaveOneOut(), GiGPO()):
        assert is_group_local(estimator)

    class Custom:
        def estimate(self, groups: object) -> object:
            raise NotImplementedError

    assert not is_group_local(Custom())  # type: ignore[arg-type]


def test_merge_results_adds_counts_and_weights_means_by_tokens() -> None:
    parts = [
        ForwardBackwardResult(
            loss=1.0,
            num_tokens=1,
            metrics={"loss_sum": 1.0, "ratio_mean": 1.0, "x:max": 3.0},
            mismatch=LogprobMismatch(sampler_kl=0.1, max_abs_diff=0.5, tokens=1),
        ),
        ForwardBackwardResult(
            loss=4.0,
            num_tokens=3,
            metrics={"loss_sum": 12.0, "ratio_mean": 2.0, "x:max": 1.0},
            mismatch=LogprobMismatch(sampler_kl=0.5, max_abs_diff=0.2, tokens=3),
        ),
    ]
    merged = merge_results(parts)
    assert merged.num_tokens == 4 and merged.loss == pytest.approx(13.0 / 4)
    assert merged.metrics == {"loss_sum": 13.0, "ratio_mean": 1.75, "x:max": 3.0, "parts": 2.0}
    assert merged.mismatch == LogprobMismatch(
        sampler_kl=pytest.approx(0.4), max_abs_diff=0.5, tokens=4
    )
    assert np.isclose(merge_results(parts, loss=0.25).loss, 0.25)


def _config(**kw: object) -> TrainConfig:
    return TrainConfig.model_validate({"env": "toy", "base_model": "tiny", **kw})


def test_config_refuses_streaming_with_off_policy_pipelining() -> None:
    with pytest.raises(ValidationError, match="--stream-groups and --max-steps-off-policy 1"):
        _config(backend="local", stream_groups=True, max_steps_off_policy=1)


def test_config_refuses_streaming_on_pytrio_and_accepts_local_and_tinker() -> None:
    with pytest.raises(ValidationError, match="--no-stream-groups with --backend pytrio"):
        _config(backend="pytrio", stream_groups=True)
    assert _config(backend="local", stream_groups=True, normalisation="sequence").stream_groups
    assert _config(backend="tinker", stream_groups=True).stream_groups
    assert not _config(backend="pytrio").stream_groups  # off by default


async def test_take_refuses_a_hook_with_off_policy_pipelining() -> None:
    src = source(FakeRollouts(), {1: ["a"]}, max_steps_off_policy=1)
    with pytest.raises(ValueError, match="max_steps_off_policy = 0"):
        await src.take(1, 0, on_group=lambda group: None)
