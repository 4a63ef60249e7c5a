"""The asynchronous group source on scripted games: admission under the staleness bound,
first-finished groups per update, versions recorded per turn, stale groups dropped or
resampled (finished ones when taken, running ones as soon as they are known to be too old)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import pytest

from agentrl.algo.advantages import GroupMean
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.core.types import Completion, CompletionStop, TaskInfo, TrajectoryGroup
from agentrl.testing import synthetic_group
from agentrl.training.asynchronous import AsyncGroupSource, group_staleness, oldest_version

GAMES = {n: [f"g{2 * (n - 1)}", f"g{2 * (n - 1) + 1}"] for n in range(1, 20)}
"""Two games per update: update n plays g(2n-2) and g(2n-1)."""


class OneToken:
    """A sampler that answers one token at once."""

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        return [Completion((7,), (-0.5,), CompletionStop.STOP)] * num_samples


class ScriptedGames:
    """Plays each game as `turns` sampled turns; a game in `held` waits after its first turn
    until released. Each turn of the group records its completion's policy version."""

    def __init__(self, turns: int = 2) -> None:
        self.turns = turns
        self.held: dict[str, asyncio.Event] = {}
        self.calls: list[tuple[str, int, str]] = []

    def hold(self, game: str) -> asyncio.Event:
        self.held[game] = asyncio.Event()
        return self.held[game]

    async def __call__(
        self, task: TaskInfo, position: int, sampler: Sampler, label: str
    ) -> TrajectoryGroup:
        self.calls.append((task.task_id, position, label))
        versions = []
        for turn in range(self.turns):
            (completion,) = await sampler.sample([1, 2], 1, SamplingParams())
            versions.append(completion.policy_version)
            gate = self.held.get(task.task_id)
            if turn == 0 and gate is not None:
                await gate.wait()
            await asyncio.sleep(0)
        group = synthetic_group([1.0, 0.0], group_id=task.task_id, turns=self.turns)
        trajectories = tuple(
            replace(
                t,
                task=task,
                turns=tuple(
                    replace(turn, policy_version=v)
                    for turn, v in zip(t.turns, versions, strict=True)
                ),
            )
            for t in group.trajectories
        )
        return replace(group, task=task, trajectories=trajectories)


async def _sampler() -> Sampler:
    return OneToken()


def source(games: ScriptedGames, **kw: object) -> AsyncGroupSource:
    options: dict[str, object] = {"max_staleness": 1, **kw}
    return AsyncGroupSource(
        play=games,
        sampler=_sampler,
        games=lambda n: [TaskInfo(task_id=g) for g in GAMES[n]],
        groups_per_update=2,
        estimator=GroupMean(),
        **options,  # type: ignore[arg-type]
    )


def ids(groups: Sequence[TrajectoryGroup]) -> list[str]:
    return [g.group_id for g in groups]


async def test_staleness_zero_plays_exactly_each_updates_own_games() -> None:
    games = ScriptedGames()
    src = source(games, max_staleness=0)
    for number in (1, 2, 3):
        taken = await src.take(number, number - 1)
        assert ids(taken.groups) == GAMES[number]
        assert {
            turn.policy_version for g in taken.groups for t in g.trajectories for turn in t.turns
        } == {number - 1}
        assert taken.counters["offpolicy/staleness"] == 0.0
        assert taken.counters["async/in_flight"] == 0.0  # nothing ran ahead
    assert games.calls == [(g, i, f"update {n}") for n in (1, 2, 3) for i, g in enumerate(GAMES[n])]
    await src.close()


async def test_an_update_takes_the_first_groups_to_finish_and_a_straggler_is_dropped() -> None:
    games = ScriptedGames()
    release = games.hold("g0")  # update 1's first game is a straggler
    src = source(games)
    first = await src.take(1, 0)
    assert ids(first.groups) == ["g1", "g2"]  # g0 did not hold the update up
    assert len(games.calls) == 4  # N = 1: update 2's games were admitted too
    second = await src.take(2, 1)
    assert ids(second.groups) == ["g3", "g4"]
    assert second.counters["offpolicy/staleness"] == 1.0  # g3 was sampled by version 0
    assert second.counters["async/in_flight"] >= 1.0  # g0 still runs
    third = await src.take(3, 2)
    # g0's first turn came from version 0: at version 2 it is 2 > N updates old, so it is
    # cancelled while running and dropped; it is never trained.
    assert third.counters["async/cancelled_groups"] == 1.0
    assert third.counters["offpolicy/dropped_groups"] == 1.0
    assert "g0" not in ids(third.groups)
    for taken, version in ((first, 0), (second, 1), (third, 2)):
        for group in taken.groups:
            assert oldest_version(group) is not None
            assert 0 <= group_staleness(group, version) <= 1
    release.set()
    await src.close()


async def test_a_stale_group_is_resampled_from_the_start_with_its_own_label() -> None:
    games = ScriptedGames()
    games.hold("g0")
    src = source(games, resample_stale=True)
    await src.take(1, 0)
    await src.take(2, 1)
    del games.held["g0"]  # the replay is not held
    third = await src.take(3, 2)
    assert third.counters["offpolicy/resampled_groups"] == 1.0
    assert ("g0", 0, "update 1 resample 1") in games.calls
    fourth = await src.take(4, 3)
    trained = ids(third.groups) + ids(fourth.groups)
    assert "g0" in trained  # the replay, sampled by fresh weights, is trained
    await src.close()


async def test_the_bound_holds_the_number_of_groups_on_their_way() -> None:
    games = ScriptedGames()
    for g in ("g0", "g1", "g2", "g3", "g4", "g5"):
        games.hold(g)
    src = source(games, max_staleness=2)
    waiting = asyncio.ensure_future(src.take(1, 0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(games.calls) == 6  # (1 + N) updates x 2 games, none more
    for event in games.held.values():
        event.set()
    await waiting
    await src.close()


async def test_max_concurrent_caps_the_running_groups() -> None:
    games = ScriptedGames()
    games.hold("g0")
    games.hold("g1")
    src = source(games, max_concurrent=2)
    waiting = asyncio.ensure_future(src.take(1, 0))
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(games.calls) == 2
    games.held["g0"].set()
    games.held["g1"].set()
    taken = await waiting
    assert len(taken.groups) == 2
    await src.close()


async def test_a_failed_group_fails_the_update_with_its_cause() -> None:
    async def broken(
        task: TaskInfo, position: int, sampler: Sampler, label: str
    ) -> TrajectoryGroup:
        raise OSError("env worker died")

    src = AsyncGroupSource(
        play=broken,
        sampler=_sampler,
        games=lambda n: [TaskInfo(task_id=g) for g in GAMES[n]],
        groups_per_update=2,
        estimator=GroupMean(),
    )
    with pytest.raises(RuntimeError, match="env worker died"):
        await src.take(1, 0)
    await src.close()


async def test_streaming_is_refused() -> None:
    src = source(ScriptedGames())
    with pytest.raises(ValueError, match="streaming"):
        await src.take(1, 0, on_group=lambda scored: None)
