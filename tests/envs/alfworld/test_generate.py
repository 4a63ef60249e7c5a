"""Offline game generation: official layout and keys, splits, determinism, verification."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from agentrl.envs.alfworld.data import TASK_TYPES, AlfworldDataError, find_games
from agentrl.envs.alfworld.generate import generate_games, scene_pool, verify_game
from agentrl.envs.alfworld.problem import build_game, problem_pddl


def test_layout_and_keys_match_the_official_games(alfworld_games) -> None:
    import alfworld

    data = Path(alfworld.__file__).parent / "data"
    domain = (data / "alfred.pddl").read_text()
    grammar = (data / "alfred.twl2").read_text()
    for game in alfworld_games.games:
        rel = game.path.relative_to(alfworld_games.root)
        json_dir, split, folder, trial, name = rel.parts
        assert (json_dir, name, split) == ("json_2.1.1", "game.tw-pddl", game.split)
        assert folder.startswith(game.task_type + "-") and trial.startswith("trial_")
        content = json.loads(game.path.read_text())
        assert set(content) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
        assert content["solvable"] is True and content["walkthrough"]
        assert content["pddl_domain"] == domain
        assert content["grammar"] == grammar.replace("UNKNOWN GOAL", game.description.rstrip("."))
        traj = json.loads((game.path.parent / "traj_data.json").read_text())
        assert {"task_type", "pddl_params", "scene"} <= set(traj)
        assert traj["task_type"] == game.task_type
        params = traj["pddl_params"]
        assert set(params) == {
            "mrecep_target",
            "object_sliced",
            "object_target",
            "parent_target",
            "toggle_target",
        }
        assert traj["scene"]["floor_plan"] == f"FloorPlan{traj['scene']['scene_num']}"
        problem = content["pddl_problem"]
        assert "(:goal" in problem and "(atLocation agent1 loc_bar_" in problem
        assert "(opened " not in problem  # openable receptacles start closed


def test_splits_use_their_floor_plans(alfworld_games) -> None:
    seen, unseen = set(scene_pool("train")), set(scene_pool("valid_unseen"))
    assert not seen & unseen
    for game in alfworld_games.games:
        traj = json.loads((game.path.parent / "traj_data.json").read_text())
        scene = traj["scene"]["scene_num"]
        assert scene in (unseen if game.split == "valid_unseen" else seen)


def test_rooms_are_realistic(alfworld_games) -> None:
    receptacles, objects = [], []
    for game in alfworld_games.games:
        problem = json.loads(game.path.read_text())["pddl_problem"]
        receptacles.append(problem.count(" - receptacle"))
        objects.append(problem.count("(objectType "))
        if "Cabinet" in problem or "Drawer" in problem:
            assert "(openable " in problem
    assert min(receptacles) >= 5 and max(receptacles) >= 15
    assert min(objects) >= 8


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_building_is_deterministic(task_type: str) -> None:
    def build(seed: int) -> str:
        spec = build_game(task_type, scene_pool("train"), random.Random(seed))
        assert spec is not None
        return problem_pddl(spec, "p")

    assert build(11) == build(11)
    assert len({build(s) for s in range(4)}) > 1


def test_rerun_resumes_and_is_deterministic(alfworld_games, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(alfworld_games.root, copy)
    report = generate_games(copy, progress=False, train=6, valid_seen=2, valid_unseen=2, seed=0)
    assert [g.id for g in report.games] == [g.id for g in alfworld_games.games]
    assert report.discarded == 0
    manifest = json.loads((copy / "generation.json").read_text())
    assert manifest["counts"] == report.counts()


@pytest.mark.parametrize("engine", ["textworld", "fast"])
def test_verification_rejects_a_wrong_walkthrough(
    alfworld_games, tmp_path: Path, engine: str
) -> None:
    source = min(alfworld_games.games, key=lambda g: g.path.stat().st_size).path
    game = json.loads(source.read_text())
    assert verify_game(str(source), engine).won
    game["walkthrough"] = game["walkthrough"][:-1]
    broken = tmp_path / "game.tw-pddl"
    broken.write_text(json.dumps(game))
    result = verify_game(str(broken), engine)
    assert not result.won and result.error == "the walkthrough did not win"
    game["walkthrough"] = ["fly to the moon"]
    broken.write_text(json.dumps(game))
    assert "not admissible" in (verify_game(str(broken), engine).error or "")


def test_timeouts_discard_games(tmp_path: Path) -> None:
    report = generate_games(
        tmp_path, train=1, seed=5, timeout=0.05, max_attempts=2, workers=1, progress=False
    )
    assert report.games == () and report.discarded == 2
    assert all("took longer than" in f for f in report.failures)
    with pytest.raises(AlfworldDataError):
        find_games(tmp_path)
    assert not (tmp_path / ".staging").exists()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        generate_games("/tmp/never", train=-1)
    with pytest.raises(ValueError, match="unknown task types"):
        generate_games("/tmp/never", train=1, task_types=["dance"])
    with pytest.raises(ValueError, match="max_receptacles=5: no train floor plan"):
        generate_games("/tmp/never", train=1, max_receptacles=5)
    with pytest.raises(ValueError, match="unknown ALFWorld engine 'stock'; available"):
        generate_games("/tmp/never", train=1, verify_engine="stock")


def test_small_rooms_only(tmp_path: Path) -> None:
    """`max_receptacles` keeps to the floor plans with that few receptacles, in both splits."""
    from agentrl.envs.alfworld.scenes import load_scene

    small = scene_pool("valid_unseen", 10)
    assert small and set(small) < set(scene_pool("valid_unseen"))
    assert all(len(load_scene(n).receptacles) <= 10 for n in small)
    report = generate_games(
        tmp_path,
        train=2,
        valid_unseen=1,
        seed=3,
        task_types=["pick_and_place_simple"],
        max_receptacles=10,
        workers=1,
        progress=False,
    )
    assert len(report.games) == 3
    for game in report.games:
        traj = json.loads((game.path.parent / "traj_data.json").read_text())
        assert traj["task_type"] == "pick_and_place_simple"
        assert len(load_scene(traj["scene"]["scene_num"]).receptacles) <= 10
    manifest = json.loads((tmp_path / "generation.json").read_text())
    assert manifest["max_receptacles"] == 10


def test_the_fast_engine_verifies_the_same_games(tmp_path: Path) -> None:
    """`verify_engine="fast"` keeps exactly the games the stock engine keeps, byte for byte."""
    sizes = dict(train=2, valid_unseen=1, seed=3, max_receptacles=10, workers=1, progress=False)
    sizes["task_types"] = ["pick_and_place_simple"]
    stock = generate_games(tmp_path / "stock", **sizes)  # type: ignore[arg-type]
    fast = generate_games(tmp_path / "fast", verify_engine="fast", **sizes)  # type: ignore[arg-type]
    assert [g.id for g in fast.games] == [g.id for g in stock.games] and len(fast.games) == 3
    for a, b in zip(stock.games, fast.games, strict=True):
        assert a.path.read_bytes() == b.path.read_bytes()
    manifest = json.loads((tmp_path / "fast" / "generation.json").read_text())
    assert manifest["verify_engine"] == "fast"
