"""The in-process and process executors under real rollouts of the busy env (real Qwen
tokenizer, a perfect text player): the same trajectories wherever the groups run, groups
played in worker processes (recorded), a crashed or hung worker losing only its group's
branches, backpressure, and no process left after `close()`."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from agentrl._optional import MissingExtraError
from agentrl.chat import ChatRenderer
from agentrl.core.env import close_env_factory
from agentrl.core.types import StopReason, TrajectoryGroup
from agentrl.executors import (
    ExecutorKind,
    ExecutorOptions,
    RemoteFactory,
    Timeouts,
    executor_factory,
)
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.store.records import TrajectoryRecord
from agentrl.testing import PolicySampler
from agentrl.testing.busy import BusySource, busy_protocol, busy_reply, busy_tasks

CONFIG = RolloutConfig(group_size=2, max_env_steps=6, max_assistant_tokens=32)


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer)


async def play(
    factory: Any, renderer: ChatRenderer, games: int, concurrent: int = 8, skip: int = 0
) -> list[TrajectoryGroup]:
    """Play tasks `busy-{skip}` ... (`games` of them), one group each."""
    return await rollout_batch(
        busy_tasks(skip + games)[skip:],
        env_factory=factory,
        sampler=PolicySampler(renderer.tokenizer, busy_reply),
        renderer=renderer,
        protocol=busy_protocol(),
        config=CONFIG,
        max_concurrent_groups=concurrent,
    )


def outcome(groups: list[TrajectoryGroup]) -> list[tuple[str, str, int, str | None]]:
    return [
        (t.task.task_id, t.stop_reason.value, len(t.turns), t.error)
        for g in groups
        for t in g.trajectories
    ]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is not alive
        return handle.read().split()[2] != "Z"


def worker_pids(factory: RemoteFactory) -> list[int]:
    pids = [w.pid for w in factory.pool.workers]  # type: ignore[attr-defined]
    return [p for p in pids if p is not None]


async def test_process_workers_play_the_same_games_as_in_process(renderer: ChatRenderer) -> None:
    source = BusySource(burn_ms=1, steps=3)
    inproc = executor_factory(source, ExecutorOptions())
    try:
        here = await play(inproc, renderer, games=4)
    finally:
        await close_env_factory(inproc)
    factory = executor_factory(source, ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=2))
    assert isinstance(factory, RemoteFactory)
    try:
        there = await play(factory, renderer, games=4)
        pids = worker_pids(factory)
        assert factory.pool.started == 2  # reused across the 4 groups
    finally:
        await factory.close()
    assert outcome(there) == outcome(here)
    assert all(t.stop_reason is StopReason.WON for g in there for t in g.trajectories)
    assert all(t.placement is None for g in here for t in g.trajectories)
    placements = {t.placement for g in there for t in g.trajectories}
    assert {f"pid {p}" in " ".join(map(str, placements)) for p in pids} == {True}
    assert len(placements) == 2
    record = TrajectoryRecord.from_trajectory(there[0].trajectories[0])
    assert TrajectoryRecord.from_json(record.to_json()).placement == record.placement
    assert record.to_trajectory().placement == record.placement
    assert pids and not any(alive(p) for p in pids)


async def test_a_crashed_worker_ends_only_its_groups_branches(renderer: ChatRenderer) -> None:
    factory = executor_factory(
        BusySource(burn_ms=1, steps=3, crash_task="busy-1"),
        ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=2),
    )
    assert isinstance(factory, RemoteFactory)
    try:
        groups = await play(factory, renderer, games=4)
        again = await play(factory, renderer, games=2, skip=2)  # the dead one replaced
        pids = worker_pids(factory)
    finally:
        await factory.close()
    for group in groups:
        reasons = {t.stop_reason for t in group.trajectories}
        if group.task.task_id == "busy-1":
            assert reasons == {StopReason.ENV_ERROR}
            for t in group.trajectories:
                assert t.error is not None and "died" in t.error and "exit code 3" in t.error
                assert len(t.turns) == 1
        else:
            assert reasons == {StopReason.WON}
    assert {t.stop_reason for g in again for t in g.trajectories} == {StopReason.WON}
    assert len({g.trajectories[0].placement for g in again}) == 2 == len(pids)
    assert not any(alive(p) for p in pids)


async def test_a_hung_step_is_cut_at_the_step_timeout(renderer: ChatRenderer) -> None:
    factory = executor_factory(
        BusySource(burn_ms=1, steps=2, hang_task="busy-0"),
        ExecutorOptions(
            kind=ExecutorKind.PROCESS, max_groups=2, timeouts=Timeouts(step=1.0, start=60.0)
        ),
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        groups = await play(factory, renderer, games=3)
    finally:
        await close_env_factory(factory)
    assert loop.time() - started < 30
    by_task = {g.task.task_id: g for g in groups}
    hung = by_task["busy-0"].trajectories
    assert {t.stop_reason for t in hung} == {StopReason.ENV_ERROR}
    assert all("took longer than 1s" in (t.error or "") for t in hung)
    rest = [t for k in ("busy-1", "busy-2") for t in by_task[k].trajectories]
    assert all(t.stop_reason is StopReason.WON for t in rest)


async def test_at_most_max_groups_are_in_flight(renderer: ChatRenderer) -> None:
    factory = executor_factory(
        BusySource(burn_ms=30, steps=2), ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=1)
    )
    assert isinstance(factory, RemoteFactory)
    try:
        groups = await play(factory, renderer, games=3, concurrent=3)
        assert factory.pool.started == 1
    finally:
        await factory.close()
    assert {t.placement for g in groups for t in g.trajectories} == {
        groups[0].trajectories[0].placement
    }


def test_a_source_that_does_not_pickle_is_refused_naming_the_fix() -> None:
    def local_source() -> Any:  # a closure: pickle cannot send it
        return BusySource()()

    with pytest.raises(TypeError, match=r"does not pickle.*module-level function"):
        executor_factory(local_source, ExecutorOptions(kind=ExecutorKind.PROCESS))


async def test_an_env_that_cannot_be_built_is_an_env_error(renderer: ChatRenderer) -> None:
    factory = executor_factory(
        BusySource(steps=0), ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=1)
    )
    try:
        (group,) = await play(factory, renderer, games=1)
    finally:
        await close_env_factory(factory)
    for t in group.trajectories:
        assert t.stop_reason is StopReason.ENV_ERROR
        assert t.error is not None
        assert "could not be built" in t.error and "steps must be >= 1" in t.error


def test_without_ray_the_ray_executor_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'agentrl\[ray\]'"):
        executor_factory(BusySource(), ExecutorOptions(kind=ExecutorKind.RAY))
