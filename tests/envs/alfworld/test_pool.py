"""EnvWorkerPool: persistent workers serve many games across updates like fresh workers,
survive a killed worker and a hung step, and leave no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrl.envs.alfworld.engine import ENGINES
from agentrl.envs.alfworld.group import AlfworldEnvGroup, AlfworldEnvOptions
from agentrl.envs.alfworld.pool import EnvWorkerPool, default_pool_size
from agentrl.rollout.turn import Stepper
from agentrl.types import EnvStep, TaskInfo
from tests.helpers.processes import alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


@pytest.fixture
def fault_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TaskInfo:
    """A task played by the scripted fault engine (registered as engine 'fault')."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import fault_engine

    monkeypatch.setitem(ENGINES, "fault", f"{fault_engine.__name__}:load")
    game = tmp_path / "game.tw-pddl"
    game.write_text("{}")
    return TaskInfo(task_id="fault", path=str(game))


async def _play(group: AlfworldEnvGroup, rounds: int) -> list[list[EnvStep]]:
    """Reset, then `rounds` steps giving branch i the i-th admissible action (cyclically)."""
    history = [await group.reset()]
    for turn in range(rounds):
        current = history[-1]
        actions: list[str | None] = [
            None
            if step.finished or not step.admissible_actions
            else step.admissible_actions[(i + turn) % len(step.admissible_actions)]
            for i, step in enumerate(current)
        ]
        history.append(await group.step(actions))
    return history


def test_default_size_is_the_cpu_count() -> None:
    assert default_pool_size() >= 1
    assert EnvWorkerPool().size == default_pool_size()
    with pytest.raises(ValueError):
        EnvWorkerPool(0)


async def test_pool_serves_many_games_across_updates_like_fresh_workers(alfworld_games) -> None:
    tasks = [g.to_task() for g in alfworld_games.games[:4]]
    options = AlfworldEnvOptions(max_steps=6)
    fresh = []
    for task in tasks:
        group = AlfworldEnvGroup(task, 2, options)
        try:
            fresh.append(await _play(group, 5))
        finally:
            await group.close()
    pool = EnvWorkerPool(2, max_cached_games=2)
    try:
        for _update in range(3):  # games come back to workers that cached (or evicted) them

            async def one(task: TaskInfo) -> list[list[EnvStep]]:
                group = AlfworldEnvGroup(task, 2, options, pool)
                try:
                    return await _play(group, 5)
                finally:
                    await group.close()

            pooled = await asyncio.gather(*(one(t) for t in tasks))
            assert pooled == fresh
        assert pool.started == 2  # no worker was started after the first update
        pids = pool.pids
        assert len(pids) == 2
    finally:
        await pool.close()
    assert not any(alive(pid) for pid in pids)


async def test_pool_replaces_a_killed_worker(fault_task: TaskInfo) -> None:
    options = AlfworldEnvOptions(engine="fault", max_steps=None)
    pool = EnvWorkerPool(1)
    try:
        group = AlfworldEnvGroup(fault_task, 2, options, pool)
        await group.reset()
        old = pool.pids[0]
        os.kill(old, signal.SIGKILL)
        steps = await group.step(["go north", "go north"])
        assert all(s.error is not None and s.finished for s in steps)
        await group.close()
        again = AlfworldEnvGroup(fault_task, 2, options, pool)
        first = await again.reset()
        assert first[0].error is None and pool.pids != [old] and pool.started == 2
        assert (await again.step(["go north", None]))[0].error is None
        await again.close()
    finally:
        await pool.close()
    assert not alive(old)


async def test_pool_survives_a_hung_step(fault_task: TaskInfo) -> None:
    options = AlfworldEnvOptions(engine="fault", max_steps=None, step_timeout=0.5)
    pool = EnvWorkerPool(1)
    try:
        hung = AlfworldEnvGroup(fault_task, 2, options, pool)
        other = AlfworldEnvGroup(fault_task, 1, options, pool)
        await hung.reset()
        await other.reset()
        old = pool.pids[0]
        steps = await hung.step(["hang", "go north"])
        assert "took longer than 0.5s" in (steps[0].error or "")
        assert steps[1].error is not None  # lost with the worker
        assert (await other.step(["go north"]))[0].error is not None  # it shared the worker
        for group in (hung, other):
            await group.close()
        assert not alive(old)
        fresh = AlfworldEnvGroup(fault_task, 1, options, pool)
        assert (await fresh.reset())[0].error is None
        assert (await fresh.step(["go north"]))[0].error is None
        pids = pool.pids
    finally:
        await pool.close()
    assert pids and not any(alive(pid) for pid in pids)


async def test_engine_that_raised_is_not_cached(fault_task: TaskInfo) -> None:
    options = AlfworldEnvOptions(engine="fault", max_steps=None)
    pool = EnvWorkerPool(1)
    try:
        group = AlfworldEnvGroup(fault_task, 2, options, pool)
        await group.reset()
        steps = await group.step(["boom", "go north"])
        assert steps[0].error is not None and steps[1].error is None
        await group.close()
        again = AlfworldEnvGroup(fault_task, 2, options, pool)
        first = await again.reset()
        assert [s.error for s in first] == [None, None]
        assert [s.error for s in await again.step(["go north", "go north"])] == [None, None]
        await again.close()
        assert pool.started == 1  # an engine error does not cost the worker
    finally:
        await pool.close()


async def test_the_builder_closes_the_factory_not_the_trainer(
    fault_task: TaskInfo, tmp_path: Path
) -> None:
    from agentrl.config import TrainConfig
    from agentrl.core.env import close_env_factory
    from agentrl.envs.alfworld.group import alfworld_group_factory
    from agentrl.envs.toy import toy_tool_protocol
    from agentrl.trainer import Trainer

    factory = alfworld_group_factory(
        AlfworldEnvOptions(engine="fault", max_steps=None), EnvWorkerPool(2)
    )
    group = factory(fault_task, 2)
    assert (await group.reset())[0].error is None
    await group.close()
    assert factory.pool is not None
    pids = factory.pool.pids
    trainer = Trainer(
        config=TrainConfig(run_dir=tmp_path / "run"),
        backend=SimpleNamespace(sampler=None),  # type: ignore[arg-type]
        env_factory=factory,
        tasks=[fault_task],
        renderer=object(),  # type: ignore[arg-type]
        protocol=toy_tool_protocol(),
        progress=False,
    )
    await trainer.close()
    await trainer.close()  # idempotent
    assert pids and all(alive(pid) for pid in pids)  # the trainer did not build the pool
    await close_env_factory(factory)  # whoever built it closes it
    await close_env_factory(factory)  # idempotent
    assert not any(alive(pid) for pid in pids)


async def test_a_group_torn_down_mid_step_leaves_its_shared_worker_in_step(
    fault_task: TaskInfo,
) -> None:
    """Two groups share one worker. The rollout tears one down mid-step (an interrupt, a stale
    group dropped): its step is let finish, so the other group reads its own answers; a step
    cut short (no grace) ends the worker, so the other group sees an error, never the torn
    group's answer."""
    options = AlfworldEnvOptions(engine="fault", max_steps=None)
    pool = EnvWorkerPool(1)
    try:
        for grace, expected in ((10.0, "You walk. Steps: 1."), (0.0, None)):
            torn = AlfworldEnvGroup(fault_task, 1, options, pool)
            other = AlfworldEnvGroup(fault_task, 1, options, pool)
            await torn.reset()
            await other.reset()
            stepper = Stepper(torn)
            pending = asyncio.create_task(stepper.step(0, "slow"))
            await asyncio.sleep(0.2)
            await stepper.stop(grace=grace)
            pending.cancel()
            await torn.close()
            (step,) = await other.step(["go north"])
            if expected is None:
                assert step.error is not None and "slowly" not in step.observation
            else:
                assert step.error is None and step.observation == expected
            await other.close()
    finally:
        await pool.close()
