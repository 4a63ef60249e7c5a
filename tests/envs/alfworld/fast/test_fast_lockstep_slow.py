"""Differential test over many games: stock TextWorld and the fast engine in lockstep (slow).

Random admissible commands, invalid commands and the PDDL planner's commands (so episodes are
won and reset), the planner's plans compared too. Official games come from `../shared/alfworld`
(skipped when absent); generated games from the project's own generator when it is present.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from fast_games import official_games

from agentrl.envs.alfworld.fast import FastAlfworldEngine, lockstep

MIX = lockstep.ActionMix(invalid=0.15, planner=0.3)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_many_official_games_in_lockstep() -> None:
    engine = FastAlfworldEngine()
    failures = []
    for index, game in enumerate(official_games(60, seed=2024)):
        result = lockstep.run(
            game, steps=40, seed=index, engine=engine, mix=MIX, compare_plans=True
        )
        if not result.identical:
            failures.append((game, result.mismatches[:3]))
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_generated_games_in_lockstep(tmp_path: Path) -> None:
    if importlib.util.find_spec("agentrl.envs.alfworld.generate") is None:
        pytest.skip("the ALFWorld game generator is not part of this checkout")
    from agentrl.envs.alfworld import generate

    out = tmp_path / "generated"
    generate.generate_games(out, train=6, valid_seen=0, valid_unseen=0, seed=7)
    games = sorted(str(p) for p in out.rglob("game.tw-pddl"))
    assert games
    engine = FastAlfworldEngine()
    for index, game in enumerate(games):
        result = lockstep.run(
            game, steps=40, seed=index, engine=engine, mix=MIX, compare_plans=True
        )
        assert result.identical, (game, result.mismatches[:3])
