"""ALFWorld game discovery: the `json_2.1.1` layout, filters, seeded shuffles and batches.

The layout is the one `alfworld-download` writes (and `agentrl generate` reproduces)::

    <root>/json_2.1.1/<split>/<task_type>-<object>-<mrecep>-<target>-<scene>/<trial>/
        game.tw-pddl      # pddl_domain, grammar, pddl_problem, solvable, walkthrough
        traj_data.json    # task_type, pddl_params, scene, ...

A game is kept when it has both files, its task type is one of the six, its path (relative to
the root) contains neither `movable` nor `Sliced`, and `solvable` is true: the official
loaders' rule, which gives 3,553 / 140 / 134 games on the official splits.
This module is pure Python (no TextWorld import).
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentrl.core.types import TaskInfo

__all__ = [
    "GAME_FILE",
    "JSON_DIR",
    "OFFICIAL_COUNTS",
    "SPLITS",
    "TASK_TYPES",
    "TRAJ_FILE",
    "AlfworldDataError",
    "GameExample",
    "batch_at",
    "count_games",
    "default_data_root",
    "find_games",
    "iter_batches",
    "read_game",
    "resolve_data_root",
    "shuffled_games",
]

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""The six ALFWorld task types, in the official order (ids 1-6)."""

SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
"""Split folder names."""

OFFICIAL_COUNTS: Mapping[str, int] = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
"""Games per split in the official data after filtering."""

JSON_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
ENV_VAR = "ALFWORLD_DATA"

_TASK_RE = re.compile(r"Your task is to: ([^\"\n]*)")

_HOW_TO_GET_DATA = (
    "Get the official games with `pip install 'agentrl[alfworld]' && alfworld-download` "
    "(they land in ~/.cache/alfworld, or in $ALFWORLD_DATA), or generate games offline with "
    "`agentrl generate --out DIR --train 60 --valid-seen 12 --valid-unseen 12 --seed 0` and "
    "pass DIR as the data root (or set ALFWORLD_DATA=DIR)."
)


class AlfworldDataError(ValueError):
    """The ALFWorld data root or one of its game files is missing or malformed."""


@dataclass(frozen=True)
class GameExample:
    """One ALFWorld game: where it is and what it asks."""

    id: str
    """Path of the game file relative to the data root (POSIX separators)."""
    split: str
    path: Path
    """Absolute path of `game.tw-pddl`."""
    task_type: str
    description: str
    """The task sentence the agent sees (e.g. `put a clean mug in coffeemachine.`)."""

    def to_task(self) -> TaskInfo:
        """This game as the `TaskInfo` that environment factories take."""
        return TaskInfo(
            task_id=self.id,
            task_type=self.task_type,
            description=self.description,
            split=self.split,
            path=str(self.path),
        )


def default_data_root() -> Path:
    """`$ALFWORLD_DATA` when set, else alfworld's cache folder `~/.cache/alfworld`."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/alfworld").expanduser()


def _json_dir(root: Path) -> Path | None:
    """The folder holding the split folders, or None when `root` has none."""
    for candidate in (root / JSON_DIR, root):
        if any((candidate / split).is_dir() for split in SPLITS):
            return candidate
    return None


def resolve_data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: `root` when given, else `$ALFWORLD_DATA`, else `~/.cache/alfworld`.

    The root is the folder that contains `json_2.1.1/` (a folder that directly contains the
    split folders is accepted too). Raises `AlfworldDataError` saying how to get games.
    """
    if root is not None:
        path, origin = Path(root).expanduser(), "the given data root"
    elif os.environ.get(ENV_VAR):
        path, origin = default_data_root(), f"${ENV_VAR}"
    else:
        path, origin = default_data_root(), "alfworld's cache folder"
    if path.is_file():
        raise AlfworldDataError(
            f"ALFWorld data root {path} ({origin}) is a file, not a folder: pass the folder "
            f"that contains {JSON_DIR}/. {_HOW_TO_GET_DATA}"
        )
    if not path.is_dir():
        raise AlfworldDataError(
            f"ALFWorld data not found: {origin} {path} does not exist. {_HOW_TO_GET_DATA}"
        )
    if _json_dir(path) is None:
        raise AlfworldDataError(
            f"ALFWorld data root {path} ({origin}) has no {JSON_DIR}/<split> folders "
            f"(expected one of {', '.join(SPLITS)}). {_HOW_TO_GET_DATA}"
        )
    return path.resolve()


def _load_json(path: Path, what: str) -> dict[str, object]:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AlfworldDataError(
            f"corrupt {what} {path}: {exc}; re-download or regenerate this game, or delete "
            "its folder"
        ) from exc
    if not isinstance(data, dict):
        raise AlfworldDataError(f"corrupt {what} {path}: expected a JSON object")
    return data


def task_description(grammar: str) -> str:
    """The task sentence written into a game's grammar (empty when there is none)."""
    match = _TASK_RE.search(grammar)
    if match is None or "UNKNOWN GOAL" in match.group(1):
        return ""
    return match.group(1).strip()


def read_game(
    game_dir: Path,
    split: str,
    root: Path,
    task_types: Iterable[str] = TASK_TYPES,
) -> GameExample | None:
    """Read one trial folder; None when the official filters drop it.

    Raises `AlfworldDataError` naming the file when a file is corrupt or misses a field.
    """
    game_file, traj_file = game_dir / GAME_FILE, game_dir / TRAJ_FILE
    if not game_file.is_file() or not traj_file.is_file():
        return None
    rel = game_file.relative_to(root).as_posix()
    if "movable" in rel or "Sliced" in rel:
        return None
    traj = _load_json(traj_file, "trajectory file")
    task_type = traj.get("task_type")
    if not isinstance(task_type, str):
        raise AlfworldDataError(f"{traj_file}: field 'task_type' is missing or not a string")
    if task_type not in set(task_types):
        return None
    game = _load_json(game_file, "game file")
    if game.get("solvable") is not True:
        return None
    grammar = game.get("grammar")
    if not isinstance(grammar, str):
        raise AlfworldDataError(f"{game_file}: field 'grammar' is missing or not a string")
    for key in ("pddl_domain", "pddl_problem"):
        if not isinstance(game.get(key), str):
            raise AlfworldDataError(f"{game_file}: field {key!r} is missing or not a string")
    return GameExample(
        id=rel,
        split=split,
        path=game_file.resolve(),
        task_type=task_type,
        description=task_description(grammar),
    )


def find_games(
    root: str | os.PathLike[str] | None = None,
    splits: Sequence[str] = SPLITS,
    task_types: Sequence[str] = TASK_TYPES,
    *,
    progress: bool = False,
) -> list[GameExample]:
    """All kept games of `splits` under the data root, sorted by id.

    Raises `AlfworldDataError` when the root is missing or holds no game of those splits.
    """
    for split in splits:
        if split not in SPLITS:
            raise AlfworldDataError(f"unknown split {split!r}; expected one of {SPLITS}")
    for task_type in task_types:
        if task_type not in TASK_TYPES:
            raise AlfworldDataError(f"unknown task type {task_type!r}; expected {TASK_TYPES}")
    data_root = resolve_data_root(root)
    json_dir = _json_dir(data_root)
    assert json_dir is not None  # checked by resolve_data_root
    trial_dirs: list[tuple[str, Path]] = []
    for split in splits:
        split_dir = json_dir / split
        if split_dir.is_dir():
            trial_dirs.extend((split, d) for d in sorted(split_dir.glob("*/*")) if d.is_dir())
    iterator: Iterable[tuple[str, Path]] = trial_dirs
    if progress:
        from tqdm import tqdm  # type: ignore[import-untyped]

        iterator = tqdm(trial_dirs, desc="reading ALFWorld games", unit="game")
    games = [
        game
        for split, trial in iterator
        if (game := read_game(trial, split, data_root, task_types)) is not None
    ]
    if not games:
        raise AlfworldDataError(
            f"no ALFWorld game of splits {list(splits)} and task types {list(task_types)} "
            f"under {json_dir} ({len(trial_dirs)} trial folders looked at). {_HOW_TO_GET_DATA}"
        )
    return sorted(games, key=lambda g: g.id)


def count_games(games: Iterable[GameExample]) -> dict[str, dict[str, int]]:
    """Games per split and task type: `{split: {task_type: n}}` (zeros included)."""
    counts: dict[str, dict[str, int]] = {}
    for game in games:
        per_type = counts.setdefault(game.split, dict.fromkeys(TASK_TYPES, 0))
        per_type[game.task_type] = per_type.get(game.task_type, 0) + 1
    return counts


def shuffled_games(games: Sequence[GameExample], seed: int) -> list[GameExample]:
    """A copy of `games` in a seeded random order (independent of the input order)."""
    ordered = sorted(games, key=lambda g: g.id)
    random.Random(seed).shuffle(ordered)
    return ordered


def _pass_order(games: Sequence[GameExample], seed: int, epoch: int) -> list[GameExample]:
    return shuffled_games(games, seed * 1_000_003 + epoch)


def batch_at(
    games: Sequence[GameExample], batch_size: int, seed: int, index: int
) -> list[GameExample]:
    """Batch number `index` of the endless, cyclic stream of seeded passes over `games`.

    Each pass is a fresh seeded shuffle; a batch may straddle two passes. Depends only on
    its arguments, so training can resume at any batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if index < 0:
        raise ValueError(f"batch index must be >= 0, got {index}")
    if not games:
        raise ValueError("cannot batch an empty list of games")
    n = len(games)
    start = index * batch_size
    batch: list[GameExample] = []
    cached: dict[int, list[GameExample]] = {}
    for position in range(start, start + batch_size):
        epoch = position // n
        if epoch not in cached:
            cached[epoch] = _pass_order(games, seed, epoch)
        batch.append(cached[epoch][position % n])
    return batch


def iter_batches(
    games: Sequence[GameExample], batch_size: int, seed: int, start: int = 0
) -> Iterator[list[GameExample]]:
    """Endless cyclic batches (`batch_at(games, batch_size, seed, i)` for i = start, ...)."""
    index = start
    while True:
        yield batch_at(games, batch_size, seed, index)
        index += 1
