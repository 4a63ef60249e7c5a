"""Discovery of ALFWorld games: layout, filters, counts, root resolution, errors, batches."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from agentrl.envs.alfworld.data import (
    OFFICIAL_COUNTS,
    TASK_TYPES,
    AlfworldDataError,
    GameExample,
    batch_at,
    count_games,
    find_games,
    iter_batches,
    resolve_data_root,
    shuffled_games,
)

GRAMMAR = '{"task": [{"rhs": "Your task is to: put a mug in desk."}]}'


def _write_game(
    root: Path,
    split: str,
    folder: str,
    trial: str = "trial_1",
    *,
    task_type: str | None = None,
    solvable: object = True,
    game: bool = True,
    traj: bool = True,
) -> Path:
    trial_dir = root / "json_2.1.1" / split / folder / trial
    trial_dir.mkdir(parents=True)
    if traj:
        kind = task_type or folder.split("-")[0]
        (trial_dir / "traj_data.json").write_text(json.dumps({"task_type": kind}))
    if game:
        data: dict[str, object] = {"pddl_domain": "", "grammar": GRAMMAR, "pddl_problem": ""}
        if solvable is not None:
            data["solvable"] = solvable
        (trial_dir / "game.tw-pddl").write_text(json.dumps(data))
    return trial_dir


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree with 8 keepers and one example of every reason to drop a game."""
    root = tmp_path / "data"
    for i, task_type in enumerate(TASK_TYPES):
        _write_game(root, "train", f"{task_type}-Mug-None-Desk-30{i}")
    _write_game(root, "valid_seen", "pick_and_place_simple-Mug-None-Desk-301")
    _write_game(root, "valid_unseen", "pick_two_obj_and_place-Mug-None-Desk-10")
    _write_game(root, "train", "pick_and_place_with_movable_recep-Mug-Bowl-Desk-1")
    _write_game(root, "train", "pick_and_place_simple-AppleSliced-None-Desk-2")
    _write_game(root, "train", "pick_and_place_simple-Mug-None-Shelf-3", "t", solvable=False)
    _write_game(root, "train", "pick_and_place_simple-Mug-None-Shelf-4", "t", solvable=None)
    _write_game(root, "train", "pick_and_place_simple-Mug-None-Shelf-5", "t", game=False)
    _write_game(root, "train", "pick_and_place_simple-Mug-None-Shelf-6", "t", traj=False)
    _write_game(root, "train", "weird-Mug-None-Shelf-7", "t", task_type="weird_task")
    return root


def test_filters_and_counts(tree: Path) -> None:
    games = find_games(tree)
    assert len(games) == 8
    counts = count_games(games)
    assert counts["train"] == dict.fromkeys(TASK_TYPES, 1)
    assert sum(counts["valid_seen"].values()) == 1
    assert counts["valid_unseen"]["pick_two_obj_and_place"] == 1
    assert not any("movable" in g.id or "Sliced" in g.id for g in games)
    game = games[0]
    assert game.id.startswith("json_2.1.1/") and game.id.endswith("/game.tw-pddl")
    assert game.path.is_absolute() and game.path.is_file()
    assert game.description == "put a mug in desk."
    task = game.to_task()
    assert (task.task_id, task.task_type, task.split) == (game.id, game.task_type, game.split)
    assert task.path == str(game.path)


def test_split_and_type_selection(tree: Path) -> None:
    assert {g.split for g in find_games(tree, splits=["valid_seen"])} == {"valid_seen"}
    only = find_games(tree, task_types=["pick_two_obj_and_place"])
    assert Counter(g.split for g in only) == {"train": 1, "valid_unseen": 1}
    with pytest.raises(AlfworldDataError, match="unknown split"):
        find_games(tree, splits=["test"])
    with pytest.raises(AlfworldDataError, match="unknown task type"):
        find_games(tree, task_types=["dance"])


def test_root_resolution(tree: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_data_root(tree) == tree.resolve()
    assert resolve_data_root(tree / "json_2.1.1") == (tree / "json_2.1.1").resolve()
    monkeypatch.setenv("ALFWORLD_DATA", str(tree))
    assert resolve_data_root() == tree.resolve()
    monkeypatch.delenv("ALFWORLD_DATA")
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (tree).rename(home / ".cache" / "alfworld")
    monkeypatch.setenv("HOME", str(home))
    assert resolve_data_root() == (home / ".cache" / "alfworld").resolve()
    assert len(find_games()) == 8


def test_missing_and_empty_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AlfworldDataError, match=r"does not exist.*alfworld-download.*generate"):
        resolve_data_root(tmp_path / "nowhere")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    with pytest.raises(AlfworldDataError, match="cache folder"):
        find_games()
    (tmp_path / "bare").mkdir()
    with pytest.raises(AlfworldDataError, match=r"no json_2\.1\.1"):
        find_games(tmp_path / "bare")
    (tmp_path / "nogames" / "json_2.1.1" / "train").mkdir(parents=True)
    with pytest.raises(AlfworldDataError, match=r"no ALFWorld game.*agentrl generate"):
        find_games(tmp_path / "nogames")


def test_corrupt_files_are_named(tmp_path: Path) -> None:
    trial = _write_game(tmp_path, "train", "pick_and_place_simple-Mug-None-Desk-1")
    (trial / "game.tw-pddl").write_text("{not json")
    with pytest.raises(AlfworldDataError, match=r"corrupt game file .*game\.tw-pddl"):
        find_games(tmp_path)
    (trial / "game.tw-pddl").write_text(json.dumps({"solvable": True, "grammar": 3}))
    with pytest.raises(AlfworldDataError, match=r"game\.tw-pddl: field 'grammar'"):
        find_games(tmp_path)
    (trial / "traj_data.json").write_text(json.dumps({"scene": {}}))
    with pytest.raises(AlfworldDataError, match=r"traj_data\.json: field 'task_type'"):
        find_games(tmp_path)


def _fake_games(n: int) -> list[GameExample]:
    return [
        GameExample(f"g{i:03d}", "train", Path(f"/g{i}"), TASK_TYPES[i % 6], "") for i in range(n)
    ]


def test_seeded_shuffle() -> None:
    games = _fake_games(20)
    a = shuffled_games(games, 7)
    assert a == shuffled_games(list(reversed(games)), 7)
    assert sorted(a, key=lambda g: g.id) == games
    assert a != shuffled_games(games, 8)


def test_cyclic_batches_cover_every_pass() -> None:
    games = _fake_games(10)
    batches = [batch_at(games, 4, seed=3, index=i) for i in range(5)]  # 20 = two passes
    flat = [g.id for b in batches for g in b]
    assert sorted(flat[:10]) == sorted(g.id for g in games)
    assert sorted(flat[10:]) == sorted(g.id for g in games)
    assert flat[:10] != flat[10:]  # each pass is reshuffled
    stream = iter_batches(games, 4, seed=3, start=2)
    assert next(stream) == batches[2] and next(stream) == batches[3]
    with pytest.raises(ValueError):
        batch_at(games, 0, 0, 0)
    with pytest.raises(ValueError):
        batch_at([], 1, 0, 0)


def test_generated_set_is_discovered(alfworld_games) -> None:
    games = find_games(alfworld_games.root)
    assert [g.id for g in games] == [g.id for g in alfworld_games.games]
    counts = count_games(games)
    assert counts["train"] == dict.fromkeys(TASK_TYPES, 1)
    assert sum(counts["valid_seen"].values()) == 2
    assert sum(counts["valid_unseen"].values()) == 2
    assert all(g.description for g in games)


def test_official_data(official_alfworld_root: Path) -> None:
    games = find_games(official_alfworld_root)
    per_split = Counter(g.split for g in games)
    assert per_split["valid_seen"] == OFFICIAL_COUNTS["valid_seen"] == 140
    assert per_split["train"] == 120  # the shared sample of the 3,553 train games
    assert set(g.task_type for g in games) == set(TASK_TYPES)
    assert all(g.description and not g.description.startswith("UNKNOWN") for g in games)
