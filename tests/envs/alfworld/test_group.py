"""AlfworldEnvGroup: the EnvGroup contract on real games, state keys, and failure handling."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from agentrl.env import EnvGroup
from agentrl.envs.alfworld.engine import ENGINES
from agentrl.envs.alfworld.group import (
    AlfworldEnvGroup,
    AlfworldEnvOptions,
    alfworld_group_factory,
    normalize_action,
)
from agentrl.testing import check_env_group
from agentrl.types import TaskInfo
from tests.helpers.processes import alive


@pytest.fixture
def fault_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TaskInfo:
    """A task played by the scripted fault engine (registered as engine 'fault')."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    import fault_engine

    monkeypatch.setitem(ENGINES, "fault", f"{fault_engine.__name__}:load")
    game = tmp_path / "game.tw-pddl"
    game.write_text("{}")
    return TaskInfo(task_id="fault", path=str(game))


def _small_game(report) -> TaskInfo:  # the game that loads fastest: the smallest file
    return min(report.games, key=lambda g: g.path.stat().st_size).to_task()


async def test_contract_on_a_generated_game(alfworld_games) -> None:
    task = _small_game(alfworld_games)
    group = AlfworldEnvGroup(task, 3)
    assert isinstance(group, EnvGroup)
    report = await check_env_group(lambda: AlfworldEnvGroup(task, 3), max_steps=8)
    assert report.steps_taken > 0 and report.invalid_actions_tried > 0


async def test_reset_and_steps(alfworld_games) -> None:
    task = _small_game(alfworld_games)
    group = alfworld_group_factory(AlfworldEnvOptions(max_steps=4))(task, 2)
    try:
        first = await group.reset()
        assert first[0] == first[1]
        assert f"Your task is to: {task.description}" in first[0].observation
        assert "help" not in first[0].admissible_actions
        assert first[0].state_key and first[0].admissible and not first[0].finished
        go = next(a for a in first[0].admissible_actions if a.startswith("go to "))
        steps = await group.step([go.upper() + "  ", go])  # normalized the same way
        assert steps[0] == steps[1] and steps[0].admissible
        assert steps[0].state_key != first[0].state_key
        looked = await group.step(["look", "dance with the ceiling"])
        assert looked[0].admissible and looked[0].state_key == steps[0].state_key
        assert not looked[1].admissible and looked[1].observation == "Nothing happens."
        assert looked[1].state_key == steps[1].state_key
        assert looked[1].info["env_steps"] == 2
        still = await group.step([None, "inventory"])
        assert still[0] == looked[0]
        last = await group.step(["inventory", "inventory"])  # branch 1 reaches 4 steps
        assert last[1].done and not last[1].won and last[1].info["truncated"]
        assert last[1].admissible_actions == () and not last[0].finished
        last = await group.step(["inventory", "inventory"])  # branch 1 stays finished
        assert last[0].done and last[0].info["truncated"] and last[0].info["env_steps"] == 4
        with pytest.raises(ValueError):
            await group.step(["look"])
    finally:
        await group.close()
    with pytest.raises(RuntimeError, match="closed"):
        await group.reset()


def test_bad_tasks_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no path"):
        AlfworldEnvGroup(TaskInfo(task_id="x"), 2)
    with pytest.raises(FileNotFoundError, match="not found"):
        AlfworldEnvGroup(TaskInfo(task_id="x", path=str(tmp_path / "missing")), 2)
    with pytest.raises(ValueError, match="unknown engine"):
        AlfworldEnvOptions(engine="warp")
    assert normalize_action("  Go   TO desk 1 ") == "go to desk 1"


async def test_close_is_idempotent_and_leaves_no_process(fault_task: TaskInfo) -> None:
    group = AlfworldEnvGroup(fault_task, 2, AlfworldEnvOptions(engine="fault"))
    await group.reset()
    pid = group.worker_pid
    assert pid is not None and alive(pid)
    await group.close()
    await group.close()
    assert not alive(pid)
    with pytest.raises(RuntimeError):
        await group.step([None, None])


async def test_engine_exception_ends_only_that_branch(fault_task: TaskInfo) -> None:
    group = AlfworldEnvGroup(fault_task, 3, AlfworldEnvOptions(engine="fault", max_steps=10))
    try:
        await group.reset()
        steps = await group.step(["boom", "go north", None])
        assert steps[0].error is not None and "exploded" in steps[0].error
        assert steps[0].finished and steps[1].error is None and steps[2].error is None
        for _ in range(2):
            steps = await group.step(["go north", "go north", None])
        assert steps[1].won and steps[1].done and steps[0].error is not None
        pid = group.worker_pid
        fresh = await group.reset()  # the broken engine's worker is replaced
        assert group.worker_pid != pid and all(s.error is None for s in fresh)
        assert (await group.step(["go north", None, None]))[0].error is None
    finally:
        await group.close()


async def test_hang_times_out_and_kills_the_worker(fault_task: TaskInfo) -> None:
    options = AlfworldEnvOptions(engine="fault", step_timeout=1.0)
    group = AlfworldEnvGroup(fault_task, 3, options)
    try:
        await group.reset()
        pid = group.worker_pid
        assert pid is not None
        steps = await asyncio.wait_for(group.step(["hang", "go north", None]), 20)
        assert "took longer than 1s" in (steps[0].error or "")
        assert "lost with the worker" in (steps[1].error or "")
        assert all(s.finished for s in steps)
        assert not alive(pid)
        again = await group.step(["go north"] * 3)  # finished branches stay finished
        assert again == steps
    finally:
        await group.close()


@pytest.mark.parametrize("how", ["exit", "sigkill"])
async def test_dead_worker_gives_env_error(fault_task: TaskInfo, how: str) -> None:
    group = AlfworldEnvGroup(fault_task, 2, AlfworldEnvOptions(engine="fault"))
    try:
        await group.reset()
        await group.step(["go north", "go north"])
        if how == "sigkill":
            pid = group.worker_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            actions = ["go north", "go north"]
        else:
            actions = ["die", "go north"]
        steps = await asyncio.wait_for(group.step(actions), 20)
        assert all(s.error is not None and "died" in s.error for s in steps), steps
        assert all(s.finished for s in steps)
    finally:
        await group.close()


async def test_killing_a_textworld_worker_mid_episode(alfworld_games) -> None:
    task = _small_game(alfworld_games)
    # the stock engine: its steps are slow enough for the kill to land mid-step
    group = AlfworldEnvGroup(task, 2, AlfworldEnvOptions(engine="textworld"))
    try:
        first = await group.reset()
        pid = group.worker_pid
        assert pid is not None
        go = next(a for a in first[0].admissible_actions if a.startswith("go to "))
        pending = asyncio.ensure_future(group.step([go, go]))
        await asyncio.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        steps = await asyncio.wait_for(pending, 30)
        # the kill may land before or after the first branch was stepped: either way no
        # branch is left waiting and every branch the worker did not finish has an error
        assert all(s.finished for s in steps)
        assert any(s.error is not None for s in steps)
        assert not alive(pid)
    finally:
        await group.close()


@pytest.mark.skipif(sys.platform != "linux", reason="uses /proc")
async def test_workers_do_not_pile_up(fault_task: TaskInfo) -> None:
    groups = [AlfworldEnvGroup(fault_task, 1, AlfworldEnvOptions(engine="fault")) for _ in range(3)]
    await asyncio.gather(*(g.reset() for g in groups))
    pids = [g.worker_pid for g in groups]
    assert all(p is not None and alive(p) for p in pids)
    await asyncio.gather(*(g.close() for g in groups))
    assert not any(alive(p) for p in pids if p is not None)
