"""`engine="fast"` behind the EnvGroup: same records as the stock engine, group by group."""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.envs.alfworld.engine import ENGINES, TextWorldEngine, open_engines
from agentrl.envs.alfworld.group import AlfworldEnvGroup, AlfworldEnvOptions
from agentrl.types import EnvStep


def _smallest(alfworld_games: Any, count: int) -> list[Any]:
    return sorted(alfworld_games.games, key=lambda g: g.path.stat().st_size)[:count]


def test_fast_is_the_default_engine() -> None:
    assert AlfworldEnvOptions().engine == "fast"
    assert {"fast", "textworld"} <= set(ENGINES)


def test_fast_engines_report_what_textworld_engines_report(alfworld_games: Any) -> None:
    game = str(_smallest(alfworld_games, 1)[0].path)
    fast = list(open_engines("fast", game, 2))
    stock = [TextWorldEngine(game) for _ in range(2)]
    rng = random.Random(5)
    try:
        current = [s.reset() for s in stock]
        assert [f.reset() for f in fast] == current
        for _ in range(30):
            for i in (0, 1):
                pool = [*current[i].admissible_commands, "dance", "go to the moon"]
                command = rng.choice(pool)
                current[i] = stock[i].step(command)
                assert fast[i].step(command) == current[i], command
                if current[i].done:
                    current[i] = stock[i].reset()
                    assert fast[i].reset() == current[i]
    finally:
        for engine in [*fast, *stock]:
            engine.close()


async def _play(group: AlfworldEnvGroup, seed: int, turns: int) -> list[list[EnvStep]]:
    rng = random.Random(seed)
    steps = await group.reset()
    history = [steps]
    for _ in range(turns):
        actions: list[str | None] = []
        for step in steps:
            if step.finished or rng.random() < 0.1:
                actions.append(None)  # a branch that waits (or sent an invalid tool call)
            elif rng.random() < 0.15:
                actions.append("Open The Pod Bay Doors")
            else:
                actions.append(rng.choice(step.admissible_actions))
        steps = await group.step(actions)
        history.append(steps)
    return history


async def test_fast_group_equals_textworld_group(alfworld_games: Any) -> None:
    task = _smallest(alfworld_games, 1)[0].to_task()
    runs = []
    for engine in ("fast", "textworld"):
        group = AlfworldEnvGroup(task, 3, AlfworldEnvOptions(engine=engine, max_steps=12))
        try:
            runs.append(await _play(group, seed=9, turns=14))
        finally:
            await group.close()
    fast, stock = runs
    assert fast == stock
    assert any(s.state_key != fast[0][0].state_key for s in fast[-1])
