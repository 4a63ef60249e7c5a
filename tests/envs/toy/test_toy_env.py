"""The toy environment passes the env checker and can be won and lost."""

from __future__ import annotations

import pytest

from agentrl.envs.toy import ToyEnvGroup, toy_task, toy_tasks
from agentrl.testing import EnvCheckError, check_env_group
from agentrl.types import TaskInfo


@pytest.mark.parametrize("task", toy_tasks(6, seed=3))
async def test_env_checker_passes(task: TaskInfo) -> None:
    report = await check_env_group(lambda: ToyEnvGroup(task, 4))
    assert report.group_size == 4 and report.steps_taken > 0


def _solution(seed: int) -> list[str]:
    game = toy_task(seed)
    plan = []
    if game.start != game.object_place:
        plan.append(f"go to {game.object_place}")
    plan += [f"take {game.obj} from {game.object_place}", f"go to {game.target}"]
    plan.append(f"move {game.obj} to {game.target}")
    return plan


@pytest.mark.parametrize("seed", range(8))
async def test_solution_wins_in_three_or_four_steps(seed: int) -> None:
    (task,) = toy_tasks(1, seed=seed)
    group = ToyEnvGroup(task, 2)
    first = await group.reset()
    assert "Your task is to: put the" in first[0].observation
    plan = _solution(seed)
    assert 3 <= len(plan) <= 4
    steps = first
    for action in plan:
        assert action in steps[0].admissible_actions
        steps = await group.step([action, None])
    assert steps[0].won and steps[0].done and steps[0].score == 1.0
    assert not steps[1].finished  # the other branch never moved
    await group.close()


async def test_dropping_loses_and_step_limit_ends() -> None:
    (task,) = toy_tasks(1, seed=1)
    game = toy_task(1)
    group = ToyEnvGroup(task, 2)
    await group.reset()
    plan = _solution(1)[:-2]  # up to and including `take`
    for action in plan:
        await group.step([action, "look"])
    steps = await group.step([f"drop {game.obj}", "look"])
    assert steps[0].done and not steps[0].won
    for _ in range(10):
        steps = await group.step([None, "look"])
    assert steps[1].done and not steps[1].won


async def test_invalid_action_is_not_admissible_and_state_keys() -> None:
    (task,) = toy_tasks(1, seed=2)
    group = ToyEnvGroup(task, 3)
    first = await group.reset()
    steps = await group.step(["fly to the moon", "look", None])
    assert not steps[0].admissible and steps[0].observation == "Nothing happens."
    assert steps[0].state_key == first[0].state_key  # same world state
    assert steps[1].admissible


async def test_broken_env_is_caught_by_the_checker() -> None:
    class Diverging(ToyEnvGroup):
        async def reset(self):  # type: ignore[no-untyped-def]
            steps = await super().reset()
            from dataclasses import replace

            return [steps[0], *[replace(s, observation=s.observation + "!") for s in steps[1:]]]

    (task,) = toy_tasks(1)
    with pytest.raises(EnvCheckError, match="branch 1 differs"):
        await check_env_group(lambda: Diverging(task, 3))


def test_bad_task_id() -> None:
    with pytest.raises(ValueError, match="toy-<seed>"):
        ToyEnvGroup(TaskInfo("alfworld/game"), 2)
