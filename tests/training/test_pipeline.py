"""Where groups come from: the off-policy schedule and its staleness cap, the stale-group
guard (drop / resample, counted), DAPO dynamic sampling, and straggler timings."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentrl.advantages import GroupMean
from agentrl.backends.base import Sampler
from agentrl.pipeline import GroupSource, Rollout, extra_batch
from agentrl.testing import synthetic_group
from agentrl.types import TaskInfo, TrajectoryGroup


class FakeRollouts:
    """Plays a game as a synthetic group: games named `d...` are degenerate (all rewards 0);
    reports its sampler as `lag` updates older than asked (a stale sampler)."""

    def __init__(self, lag: int = 0) -> None:
        self.lag = lag
        self.calls: list[tuple[list[str], int, str]] = []

    async def __call__(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: Callable[[TrajectoryGroup], None] | None = None,
    ) -> Rollout:
        self.calls.append(([t.task_id for t in tasks], version, label))
        await asyncio.sleep(0)
        groups = tuple(
            synthetic_group(
                [0.0, 0.0] if t.task_id.startswith("d") else [1.0, 0.0], group_id=t.task_id
            )
            for t in tasks
        )
        for group in groups:
            if on_group is not None:
                on_group(group)
        return Rollout(groups, version - self.lag, tuple(float(i) for i in range(len(tasks))))


async def _sampler() -> Any:
    return object()


def source(rollouts: FakeRollouts, games: dict[int, list[str]], **kw: Any) -> GroupSource:
    extra = [TaskInfo(task_id=f"x{i}") for i in range(10)]
    return GroupSource(
        rollout=rollouts,
        sampler=_sampler,
        games=lambda n: [TaskInfo(task_id=g) for g in games[n]],
        extra_games=lambda n, count: extra[:count],
        estimator=GroupMean(),
        **kw,
    )


async def test_k0_runs_nothing_ahead_and_measures_stragglers() -> None:
    rollouts = FakeRollouts()
    src = source(rollouts, {1: ["a", "b", "c"], 2: ["e"]})
    taken = await src.take(1, 0)
    assert [g.group_id for g in taken.groups] == ["a", "b", "c"]
    assert rollouts.calls == [(["a", "b", "c"], 0, "update 1")]
    assert dict(taken.counters) == {
        "stragglers/group_seconds_p50": 1.0,
        "stragglers/group_seconds_max": 2.0,
    }


async def test_k_ahead_schedule_keeps_staleness_at_most_k() -> None:
    for k in (1, 2, 3):
        rollouts = FakeRollouts()
        src = source(
            rollouts, {n: [f"g{n}"] for n in range(1, 8)}, max_steps_off_policy=k, last_update=6
        )
        staleness = []
        for n in range(1, 7):
            taken = await src.take(n, n - 1)  # every update trains: version = n - 1
            staleness.append(taken.counters["offpolicy/staleness"])
            assert [g.group_id for g in taken.groups] == [f"g{n}"]
        assert max(staleness) == k and staleness == [min(n, k) for n in range(6)]
        started = [c[0][0] for c in rollouts.calls]
        assert started == [f"g{n}" for n in range(1, 7)]  # nothing beyond last_update
        await src.close()


async def test_stale_groups_are_dropped_or_resampled_and_counted() -> None:
    games = {1: ["a", "b"]}
    dropped = await source(FakeRollouts(lag=2), games, max_steps_off_policy=1, last_update=1).take(
        1, 0
    )
    assert dropped.groups == ()
    assert dropped.counters["offpolicy/staleness"] == 2.0
    assert dropped.counters["offpolicy/stale_groups"] == 2.0
    assert dropped.counters["offpolicy/dropped_groups"] == 2.0

    rollouts = FakeRollouts(lag=2)
    src = source(rollouts, games, max_steps_off_policy=1, resample_stale=True, last_update=1)
    resampled = await src.take(1, 0)
    assert [g.group_id for g in resampled.groups] == ["a", "b"]
    assert resampled.counters["offpolicy/resampled_groups"] == 2.0
    assert rollouts.calls[-1] == (["a", "b"], 0, "update 1 resample")


async def test_within_k_nothing_is_dropped() -> None:
    taken = await source(
        FakeRollouts(lag=1), {1: ["a"]}, max_steps_off_policy=1, last_update=1
    ).take(1, 0)
    assert len(taken.groups) == 1 and "offpolicy/stale_groups" not in taken.counters


@pytest.mark.parametrize(
    ("budget", "replaced", "left", "extra"),
    [(0, None, None, None), (1, 1, 2, 1), (2, 2, 1, 2), (5, 3, 0, 3)],
)
async def test_dynamic_sampling_replaces_degenerate_groups_up_to_a_budget(
    budget: int, replaced: int | None, left: int | None, extra: int | None
) -> None:
    rollouts = FakeRollouts()
    src = source(rollouts, {1: ["d1", "a", "d2", "d3"]}, dynamic_budget=budget)
    taken = await src.take(1, 0)
    ids = [g.group_id for g in taken.groups]
    if budget == 0:
        assert ids == ["d1", "a", "d2", "d3"] and "dynamic/extra_games" not in taken.counters
        return
    assert taken.counters["dynamic/replaced_groups"] == replaced
    assert taken.counters["dynamic/degenerate_left"] == left
    assert taken.counters["dynamic/extra_games"] == extra
    assert len(ids) == 4 and ids[1] == "a"  # replaced in place, the batch keeps its size
    assert sum(i.startswith("x") for i in ids) == replaced
    assert GroupMean().estimate(list(taken.groups)).degenerate_groups == left


async def test_dynamic_sampling_counts_degenerate_replacements_against_the_budget() -> None:
    class AllDegenerate(FakeRollouts):
        async def __call__(self, tasks, sampler, version, label):  # type: ignore[override]
            return await super().__call__(
                [TaskInfo(task_id="d" + t.task_id) for t in tasks], sampler, version, label
            )

    rollouts = AllDegenerate()
    taken = await source(rollouts, {1: ["1", "2"]}, dynamic_budget=3).take(1, 0)
    assert taken.counters["dynamic/extra_games"] == 3.0
    assert taken.counters["dynamic/replaced_groups"] == 0.0
    assert taken.counters["dynamic/degenerate_left"] == 2.0
    assert [len(c[0]) for c in rollouts.calls] == [2, 2, 1]  # never more than the budget


def test_extra_games_are_a_seeded_stream_of_their_own() -> None:
    tasks = [TaskInfo(task_id=f"g{i}") for i in range(20)]
    assert extra_batch(tasks, 4, 0, 3) == extra_batch(list(reversed(tasks)), 4, 0, 3)
    assert extra_batch(tasks, 4, 0, 3) != extra_batch(tasks, 4, 0, 4)
