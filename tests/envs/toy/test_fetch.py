"""The fetch task: won only by reading the goal; a random valid policy wins 1 / (objects x bins)."""

from __future__ import annotations

import itertools

import pytest

from agentrl.envs.toy import FetchEnvGroup, fetch_task, fetch_tasks, random_valid_success
from agentrl.envs.toy.fetch import FetchCommands
from agentrl.testing.env_check import check_env_group
from agentrl.tools import ToolResult
from agentrl.types import ParsedAction, TurnStatus


async def test_contract() -> None:
    task = fetch_tasks(1)[0]
    await check_env_group(lambda: FetchEnvGroup(task, 3))


async def test_exactly_one_of_nine_valid_plays_wins() -> None:
    task = fetch_tasks(1, seed=7)[0]
    game = fetch_task(7)
    plays = list(itertools.product(game.objects, game.receptacles))
    group = FetchEnvGroup(task, len(plays))
    first = await group.reset()
    assert game.description in first[0].observation
    await group.step([f"take {obj}" for obj, _ in plays])
    steps = await group.step([f"put {obj} in {place}" for obj, place in plays])
    assert all(s.done for s in steps)
    assert sum(s.won for s in steps) == 1
    assert random_valid_success() == pytest.approx(1 / 9)


async def test_invalid_reply_uses_a_step_and_the_goal_ends_every_message() -> None:
    task = fetch_tasks(1, seed=3)[0]
    group = FetchEnvGroup(task, 1, max_steps=2)
    first = (await group.reset())[0]
    after = (await group.step(["dance"]))[0]
    assert not after.admissible and not after.done
    protocol = FetchCommands()
    _, user = protocol.initial_messages(task, first, 2)
    assert user.content.endswith(task.description)
    result = ToolResult(TurnStatus.EXECUTED, after, ParsedAction(action="dance"), 1, 2)
    assert protocol.tool_message(result).content.endswith(task.description)
    last = (await group.step([after.admissible_actions[0]]))[0]
    assert last.done and not last.won  # the step limit, not a win
