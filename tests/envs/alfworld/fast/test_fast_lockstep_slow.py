"""Differential test over many games: stock TextWorld and the fast engine in lockstep (slow).

Random admissible commands, invalid commands and the PDDL planner's commands (so episodes are
won and reset), the planner's plans compared too. Official games come from `../shared/alfworld`
(skipped when absent), generated games from the project's generator (`alfworld_games`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.envs.alfworld.fast import FastAlfworldEngine, lockstep
from tests.envs.alfworld.fast.fast_games import official_games

MIX = lockstep.ActionMix(invalid=0.15, planner=0.3)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_many_official_games_in_lockstep(official_alfworld_root: Path) -> None:
    # no planner here: fast-downward's search can take a minute on large games
    engine = FastAlfworldEngine()
    mix = lockstep.ActionMix(invalid=0.15, planner=0.0)
    failures = []
    for index, game in enumerate(official_games(official_alfworld_root, 40, seed=2024)):
        result = lockstep.run(game, steps=40, seed=index, engine=engine, mix=mix)
        if not result.identical:
            failures.append((game, result.mismatches[:3]))
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_small_official_games_with_the_planner(official_alfworld_root: Path) -> None:
    engine = FastAlfworldEngine()
    games = official_games(official_alfworld_root, 10, seed=7, max_bytes=65_000)
    wins = 0
    for index, game in enumerate(games):
        result = lockstep.run(
            game, steps=40, seed=index, engine=engine, mix=MIX, compare_plans=True
        )
        assert result.identical, (game, result.mismatches[:3])
        wins += result.wins
    assert wins > 0


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_generated_games_in_lockstep(alfworld_games: Any) -> None:
    engine = FastAlfworldEngine()
    for index, game in enumerate(alfworld_games.games):
        result = lockstep.run(
            str(game.path), steps=60, seed=index, engine=engine, mix=MIX, compare_plans=True
        )
        assert result.identical, (game.path, result.mismatches[:3])
