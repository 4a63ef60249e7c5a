"""The in-process and process executors under real rollouts of the busy env (real Qwen
tokenizer, a perfect text player): the same trajectories wherever the groups run, groups
played in worker processes (recorded), a crashed or hung worker losing only its group's
branches, backpressure, and no process left after `close()`."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

import pytest

from agentrl._optional import MissingExtraError
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroup, close_env_factory
from agentrl.core.types import EnvStep, StopReason, TaskInfo, TrajectoryGroup
from agentrl.executors import (
    ExecutorKind,
    ExecutorOptions,
    RemoteFactory,
    Timeouts,
    executor_factory,
)
from agentrl.rollout import RolloutConfig, rollout_batch, turn
from agentrl.store.records import TrajectoryRecord
from agentrl.testing import PolicySampler, check_env_group
from agentrl.testing.busy import BusyGroup, BusySource, busy_protocol, busy_reply, busy_tasks

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


async def play_in_workers(
    source: BusySource, renderer: ChatRenderer, games: int, workers: int = 1
) -> list[TrajectoryGroup]:
    """Play `games` groups of `source` under a process executor built and closed here."""
    factory = executor_factory(
        source, ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=workers)
    )
    try:
        return await play(factory, renderer, games=games)
    finally:
        await close_env_factory(factory)


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    assert {int(str(p).rsplit("pid ", 1)[1]) for p in placements} == set(pids)
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
            kind=ExecutorKind.PROCESS, max_groups=2, timeouts=Timeouts(step=5.0, start=60.0)
        ),
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        groups = await play(factory, renderer, games=3)
    finally:
        await close_env_factory(factory)
    assert loop.time() - started < 60
    by_task = {g.task.task_id: g for g in groups}
    hung = by_task["busy-0"].trajectories
    assert {t.stop_reason for t in hung} == {StopReason.ENV_ERROR}
    assert all("stepping took longer than 5s" in (t.error or "") for t in hung)
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


def test_without_ray_the_ray_executor_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'agentrl\[ray\]'"):
        executor_factory(BusySource(), ExecutorOptions(kind=ExecutorKind.RAY))


@pytest.mark.parametrize("grace", [10.0, 0.0], ids=["step-finishes", "step-cut-short"])
async def test_a_rollout_cancelled_mid_step_leaves_no_stale_answer(
    renderer: ChatRenderer, monkeypatch: pytest.MonkeyPatch, grace: float
) -> None:
    """An interrupt cancels a rollout while its worker is stepping. Given the grace, the step
    finishes and the worker is kept; cut short, the worker is ended (its answer would reach
    the next call). Either way the next batch plays normally."""
    monkeypatch.setattr(turn, "STEP_GRACE", grace)
    factory = executor_factory(
        BusySource(burn_ms=400, steps=2), ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=1)
    )
    assert isinstance(factory, RemoteFactory)
    try:
        batch = asyncio.create_task(play(factory, renderer, games=1))
        while not factory.pool.workers:  # started (imports done), then it resets its group
            await asyncio.sleep(0.02)
        first = worker_pids(factory)
        started = cpu_seconds(first[0])
        while cpu_seconds(first[0]) < started + 0.1:  # a step burns 0.8 s of CPU: in one now
            await asyncio.sleep(0.02)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
        (group,) = await play(factory, renderer, games=1, skip=1)
        assert [t.stop_reason for t in group.trajectories] == [StopReason.WON] * 2
        assert (worker_pids(factory) == first) is (grace > 0)
    finally:
        await factory.close()
    assert not any(alive(p) for p in first)


async def test_a_remote_group_keeps_the_env_group_contract() -> None:
    factory = executor_factory(
        BusySource(burn_ms=0, steps=5), ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=1)
    )
    try:
        report = await check_env_group(lambda: factory(busy_tasks(1)[0], 3), max_steps=10)
    finally:
        await close_env_factory(factory)
    assert report.steps_taken >= 5


async def test_an_env_that_cannot_be_built_stops_starting_workers(renderer: ChatRenderer) -> None:
    factory = executor_factory(
        BusySource(steps=0), ExecutorOptions(kind=ExecutorKind.PROCESS, max_groups=2)
    )
    assert isinstance(factory, RemoteFactory)
    try:
        groups = await play(factory, renderer, games=3, concurrent=1)
        assert factory.pool.started == 0  # the one that failed to build is not counted
    finally:
        await factory.close()
    errors = {t.error for g in groups for t in g.trajectories}
    assert len(errors) == 1 and "steps must be >= 1" in str(errors.pop())


def main_source() -> Any:
    return BusySource()()


def test_a_source_from_a_script_is_refused_naming_the_fix() -> None:
    main_source.__module__ = "__main__"  # as if defined in the script being run
    with pytest.raises(TypeError, match=r"define it in an importable module"):
        executor_factory(main_source, ExecutorOptions(kind=ExecutorKind.PROCESS))


class ProxyInfoGroup(BusyGroup):
    """A busy group whose steps carry a mapping proxy in `info` (it does not pickle)."""

    def _step(self, branch: int, text: str, admissible: bool) -> EnvStep:
        step = super()._step(branch, text, admissible)
        return replace(step, info=MappingProxyType(dict(step.info)))


@dataclass(frozen=True)
class ProxyInfoSource(BusySource):
    def group(self, task: TaskInfo, group_size: int) -> EnvGroup:
        return ProxyInfoGroup(self, task, group_size)


async def test_an_answer_that_does_not_pickle_is_an_env_error_naming_the_cause(
    renderer: ChatRenderer,
) -> None:
    (group,) = await play_in_workers(ProxyInfoSource(burn_ms=0), renderer, games=1)
    for t in group.trajectories:
        assert t.stop_reason is StopReason.ENV_ERROR
        assert "does not pickle" in (t.error or "") and "info: str, int" in (t.error or "")
