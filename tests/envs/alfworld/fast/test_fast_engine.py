"""The fast ALFWorld engine against stock TextWorld, step by step (default suite)."""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.envs.alfworld.fast import (
    FastAlfworldEngine,
    GameLoadError,
    TextWorldBranch,
    lockstep,
)
from tests.envs.alfworld.fast.fast_games import official_games

MIX = lockstep.ActionMix(invalid=0.15, planner=0.3)


@pytest.fixture(scope="module")
def engine() -> FastAlfworldEngine:
    return FastAlfworldEngine()


def test_tiny_game_is_identical_in_lockstep(tiny_game: str, engine: FastAlfworldEngine) -> None:
    result = lockstep.run(tiny_game, steps=80, seed=3, engine=engine, mix=MIX, compare_plans=True)
    assert result.identical, result.mismatches[:3]
    assert result.wins >= 1  # the planner's actions reach the goal, so won/score/done are compared


def test_official_games_are_identical_in_lockstep(
    official_alfworld_root: Path, engine: FastAlfworldEngine
) -> None:
    # small games keep the default suite fast; the slow suite plays many games of every size
    games = official_games(official_alfworld_root, 3, seed=11, max_bytes=70_000)
    for index, game in enumerate(games):
        result = lockstep.run(game, steps=20, seed=index, engine=engine, mix=MIX)
        assert result.identical, (game, result.mismatches[:3])


def test_generated_games_are_identical_in_lockstep(
    alfworld_games: Any, engine: FastAlfworldEngine
) -> None:
    games = sorted(alfworld_games.games, key=lambda g: g.path.stat().st_size)[:2]
    for index, game in enumerate(games):
        result = lockstep.run(str(game.path), steps=25, seed=index, engine=engine, mix=MIX)
        assert result.identical, (game.path, result.mismatches[:3])


def test_branches_of_one_game_are_independent(tiny_game: str, engine: FastAlfworldEngine) -> None:
    rng = random.Random(0)
    fast = engine.branches(tiny_game, 3)
    stock = [TextWorldBranch(tiny_game) for _ in range(3)]
    current = [s.reset() for s in stock]
    assert [f.reset() for f in fast] == current
    for _ in range(25):
        for i in rng.sample(range(3), 3):  # interleave the branches in a random order
            command = rng.choice(current[i].admissible_commands)
            current[i] = stock[i].step(command)
            assert fast[i].step(command) == current[i]
            if current[i].done:
                current[i] = stock[i].reset()
                assert fast[i].reset() == current[i]
    assert len({f.state_key() for f in fast}) > 1  # they really went different ways


def test_copy_continues_independently(tiny_game: str, engine: FastAlfworldEngine) -> None:
    plan = TextWorldBranch(tiny_game)
    plan.reset()
    commands = plan.plan()
    original = engine.branch(tiny_game)
    original.reset()
    for command in commands[:3]:
        original.step(command)
    twin = original.copy()
    assert twin.state_key() == original.state_key()
    finished = [twin.step(c) for c in commands[3:]][-1]
    assert finished.won and finished.score == 1.0 and finished.done
    moved = original.step("inventory")  # the original did not follow the copy
    assert moved.observation.startswith("You are carrying: a apple")
    assert not moved.won
    stock = TextWorldBranch(tiny_game)
    stock.reset()
    for command in [*commands[:3], "inventory"]:
        expected = stock.step(command)
    assert moved == expected


def test_reset_restores_the_initial_state(tiny_game: str, engine: FastAlfworldEngine) -> None:
    branch = engine.branch(tiny_game)
    first = branch.reset()
    for command in ["go to fridge 1", "open fridge 1", "take apple 2 from fridge 1"]:
        assert branch.step(command).executed
    assert branch.state_key() != first.state_key
    assert branch.reset() == first
    assert first.gamefile == tiny_game and first.score == 0.0 and not first.done


def test_invalid_command_changes_nothing(tiny_game: str, engine: FastAlfworldEngine) -> None:
    branch = engine.branch(tiny_game)
    first = branch.reset()
    step = branch.step("open the pod bay doors")
    assert step.observation == "Nothing happens." and not step.executed
    assert step.admissible_commands == first.admissible_commands
    assert step.state_key == first.state_key
    assert step.gamefile is None  # as ALFWorld reports it after a step


def test_game_is_loaded_once_and_reloaded_when_changed(tmp_path: Path, tiny_game: str) -> None:
    path = tmp_path / "game.tw-pddl"
    data = json.loads(Path(tiny_game).read_text())
    path.write_text(json.dumps(data))
    engine = FastAlfworldEngine(max_cached_games=2)
    first = engine.game(path)
    assert engine.game(path) is first
    data["grammar"] = data["grammar"].replace("a hot apple", "a warm apple")
    path.write_text(json.dumps(data) + " ")
    reloaded = engine.game(path)
    assert reloaded is not first
    assert "a warm apple" in engine.branch(path).reset().observation


def test_bad_game_files_name_the_file(tmp_path: Path, tiny_game: str) -> None:
    engine = FastAlfworldEngine()
    missing = tmp_path / "missing.tw-pddl"
    with pytest.raises(FileNotFoundError, match=r"missing\.tw-pddl"):
        engine.branch(missing)
    broken = tmp_path / "broken.tw-pddl"
    broken.write_text("{not json")
    with pytest.raises(GameLoadError, match=r"broken\.tw-pddl"):
        engine.branch(broken)
    partial = tmp_path / "partial.tw-pddl"
    partial.write_text(json.dumps({"pddl_domain": "", "grammar": ""}))
    with pytest.raises(GameLoadError, match="pddl_problem"):
        engine.branch(partial)
    bad_pddl = tmp_path / "bad_pddl.tw-pddl"
    data = json.loads(Path(tiny_game).read_text())
    data["pddl_problem"] = data["pddl_problem"].replace("(:init", "(:init (unknownPredicate x)")
    bad_pddl.write_text(json.dumps(data))
    with pytest.raises(GameLoadError, match=r"bad_pddl\.tw-pddl"):
        engine.branch(bad_pddl)


def test_closed_branch_refuses_to_play(tiny_game: str, engine: FastAlfworldEngine) -> None:
    branch = engine.branch(tiny_game)
    branch.close()
    branch.close()
    with pytest.raises(RuntimeError, match="closed"):
        branch.reset()


def test_many_games_load_one_after_another(tmp_path: Path, tiny_game: str) -> None:
    # games come and go: their fast-downward libraries are reused, never unloaded (unloading a
    # used copy made the next load crash the process)
    data = json.loads(Path(tiny_game).read_text())
    engine = FastAlfworldEngine(max_cached_games=1)
    observations = []
    for index in range(7):
        path = tmp_path / f"game{index}.tw-pddl"
        data["grammar"] = data["grammar"].replace("hot apple", f"hot apple {index}", 1)
        path.write_text(json.dumps(data))
        branch = engine.branch(path)
        observations.append(branch.reset().observation)
        branch.step("go to fridge 1")
        assert branch.plan()  # the planner's search runs in the library too
        branch.close()
        del branch
        gc.collect()
    assert len(set(observations)) == 7
