"""One way through an update: advantages estimated once per group and reused by dynamic
sampling, streaming and whole-batch training; both build datums through `scored_datums`; the
trainer neither calls back from the pipeline nor closes what it did not build."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from agentrl.algo.advantages import Advantages, GroupMean, is_group_local, score_groups
from agentrl.algo.datums import scored_datums
from agentrl.config import TrainConfig
from agentrl.core.env import ClosableEnvFactory, close_env_factory
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.toy import ToyEnvGroup, toy_tool_protocol
from agentrl.testing import synthetic_group
from agentrl.training.pipeline import GroupSource, play_tasks
from agentrl.training.streaming import GroupStreamer
from agentrl.training.trainer import Trainer
from tests.training.test_pipeline import FakeRollouts, _sampler
from tests.training.test_streaming import RecordingStream


class Counting:
    """GroupMean that counts how often each group is estimated."""

    def __init__(self, group_local: bool = True) -> None:
        self.group_local = group_local
        self.seen: Counter[str] = Counter()
        self.calls = 0

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        self.calls += 1
        self.seen.update(g.group_id for g in groups)
        return GroupMean().estimate(groups)


def _source(estimator: Counting, games: list[str], **kw: Any) -> GroupSource:
    extra = [TaskInfo(task_id=f"x{i}") for i in range(10)]
    return GroupSource(
        rollout=FakeRollouts(),
        sampler=_sampler,
        games=lambda n: [TaskInfo(task_id=g) for g in games],
        extra_games=lambda n, count: extra[:count],
        estimator=estimator,
        **kw,
    )


async def test_dynamic_sampling_estimates_each_group_once() -> None:
    counting = Counting()
    taken = await _source(counting, ["a", "d1", "b", "d2"], dynamic_budget=3).take(1, 0)
    assert [g.group_id for g in taken.groups] == ["a", "x0", "b", "x1"]
    assert counting.seen == Counter({"a": 1, "d1": 1, "b": 1, "d2": 1, "x0": 1, "x1": 1})
    assert taken.advantages == GroupMean().estimate(taken.groups)  # same answer as the batch's
    assert [s.degenerate for s in taken.scored] == [False] * 4


async def test_streaming_reuses_the_sources_scores() -> None:
    counting = Counting()
    src = _source(counting, ["a", "d1", "b", "d2"], dynamic_budget=3)
    stream = RecordingStream()
    streamer = GroupStreamer(stream)  # no estimator: it can only reuse the source's scores
    taken = await src.take(1, 0, on_group=streamer.on_group)
    batch = await streamer.finish(taken.scored)
    assert set(counting.seen.values()) == {1} and len(counting.seen) == 6
    assert batch.advantages == taken.advantages
    streamed = [d for part in stream.parts for d in part]
    _same(streamed, scored_datums(taken.scored))


async def test_a_batch_level_estimator_runs_once_on_the_batch() -> None:
    counting = Counting(group_local=False)
    assert not is_group_local(counting)
    taken = await _source(counting, ["a", "d1", "b"]).take(1, 0)
    assert counting.calls == 1 and counting.seen == Counter({"a": 1, "d1": 1, "b": 1})
    assert taken.advantages == GroupMean().estimate(taken.groups)


def _same(left: Sequence[Any], right: Sequence[Any]) -> None:
    assert len(left) == len(right) > 0
    for a, b in zip(left, right, strict=True):
        for name in ("model_input", "target_tokens", "logprobs", "advantages", "mask"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


async def test_streaming_and_whole_batch_build_identical_datums() -> None:
    groups = [
        synthetic_group([1.0, 0.0], group_id="a"),
        synthetic_group([0.0, 0.0], group_id="d"),
        synthetic_group([2.0, 0.0, 1.0], group_id="b"),
    ]
    scored = score_groups(GroupMean(), groups)
    stream = RecordingStream()
    streamer = GroupStreamer(stream)
    for one in scored:
        streamer.on_group(one)
        await asyncio.sleep(0)
    await streamer.finish(scored)
    _same([d for part in stream.parts for d in part], scored_datums(scored))


class Pool:
    """A factory that owns a resource."""

    def __init__(self) -> None:
        self.closed = 0

    def __call__(self, task: TaskInfo, group_size: int) -> ToyEnvGroup:
        return ToyEnvGroup(task, group_size)

    async def close(self) -> None:
        self.closed += 1


async def test_the_trainer_leaves_a_passed_in_factory_open(tmp_path: Path) -> None:
    pool = Pool()
    assert isinstance(pool, ClosableEnvFactory)
    trainer = Trainer(
        config=TrainConfig(run_dir=tmp_path / "run"),
        backend=SimpleNamespace(sampler=None),  # type: ignore[arg-type]
        env_factory=pool,
        tasks=[TaskInfo(task_id="t")],
        renderer=object(),  # type: ignore[arg-type]
        protocol=toy_tool_protocol(),
        progress=False,
    )
    await trainer.close()
    assert pool.closed == 0
    # the source plays through a plain function of the pipeline, not a trainer method
    rollout = trainer.source._rollout
    assert isinstance(rollout, partial) and rollout.func is play_tasks
    await close_env_factory(pool)  # whoever built it
    assert pool.closed == 1


async def test_close_env_factory_leaves_a_plain_function_alone() -> None:
    def plain(task: TaskInfo, group_size: int) -> ToyEnvGroup:
        return ToyEnvGroup(task, group_size)

    assert not isinstance(plain, ClosableEnvFactory)
    await close_env_factory(plain)


class _Declared:
    group_local: ClassVar[bool] = True

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        return GroupMean().estimate(groups)


def test_group_local_is_read_from_the_protocol_member() -> None:
    assert is_group_local(_Declared()) and is_group_local(GroupMean())
    assert not is_group_local(Counting(group_local=False))
