"""Offline generation of ALFWorld-compatible games (`agentrl generate`).

Games are written in the official layout (`<out>/json_2.1.1/<split>/<task>-<obj>-None-
<target>-<scene>/<trial>/{game.tw-pddl,traj_data.json}`) with the domain and grammar that
`alfworld` ships, so `find_games` reads generated and official games alike. Every game is
played to `won=True` in real TextWorld (in a worker process, with a time bound; or, with
`verify_engine="fast"`, in the project's byte-identical engine, which the env plays with by
default) before it is kept; the winning plan is stored as the game's `walkthrough`. A game
that fails or times out is discarded and regenerated from the next seed. `valid_unseen` uses
floor plans that `train` and `valid_seen` never use. Output is deterministic for a seed, and a
rerun with the same arguments resumes: games already written are kept.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agentrl.envs.alfworld.data import (
    GAME_FILE,
    JSON_DIR,
    SPLITS,
    TASK_TYPES,
    TRAJ_FILE,
    GameExample,
    count_games,
    read_game,
)
from agentrl.envs.alfworld.expert import ExpertTask, expert_plan, parse_world
from agentrl.envs.alfworld.problem import GameSpec, build_game, problem_pddl
from agentrl.envs.alfworld.scenes import alfworld_gen, load_scene

__all__ = [
    "GenerationReport",
    "VerifyResult",
    "generate_games",
    "scene_pool",
    "verify_game",
]


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of playing a game's walkthrough in TextWorld."""

    won: bool
    steps: int
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class GenerationReport:
    """What `generate_games` wrote."""

    root: Path
    """The data root (pass it to `find_games`)."""
    games: tuple[GameExample, ...]
    discarded: int
    """Candidate games that failed verification or timed out."""
    seconds: float
    failures: tuple[str, ...] = field(default=())
    """Why discarded candidates failed (one line each)."""

    def counts(self) -> dict[str, dict[str, int]]:
        """Games per split and task type."""
        return count_games(self.games)


def verify_game(game_file: str, engine_name: str = "textworld") -> VerifyResult:
    """Play the game's walkthrough with the engine `engine_name` (default: the stock TextWorld
    engine; "fast": the project's, byte-identical and about 5x quicker to load a game, see
    `agentrl.envs.alfworld.engine.ENGINES`); won=True when it wins.

    Runs in a worker process (see `generate_games`); every command must be admissible.
    """
    from agentrl.envs.alfworld.engine import open_engines

    start = time.perf_counter()
    plan = json.loads(Path(game_file).read_text(encoding="utf-8")).get("walkthrough") or []
    (engine,) = open_engines(engine_name, game_file, 1)
    try:
        step = engine.reset()
        if step.won:
            return VerifyResult(False, 0, time.perf_counter() - start, "won before any step")
        for done_steps, command in enumerate(plan):
            if command not in step.admissible_commands:
                return VerifyResult(
                    False, done_steps, time.perf_counter() - start, f"{command!r} not admissible"
                )
            step = engine.step(command)
        error = None if step.won else "the walkthrough did not win"
        return VerifyResult(step.won, len(plan), time.perf_counter() - start, error)
    finally:
        engine.close()


def scene_pool(split: str, max_receptacles: int | None = None) -> tuple[int, ...]:
    """Floor plans a split draws from: ALFRED's train scenes, or its held-out test scenes;
    with `max_receptacles`, only the floor plans with at most that many receptacles (the
    small rooms: 6 to 13 receptacles where kitchens have up to 54)."""
    constants, _ = alfworld_gen()
    if split == "valid_unseen":
        numbers = tuple(constants.TEST_SCENE_NUMBERS)
    else:
        numbers = tuple(constants.TRAIN_SCENE_NUMBERS)
    if max_receptacles is None:
        return numbers
    return tuple(n for n in numbers if len(load_scene(n).receptacles) <= max_receptacles)


@dataclass(frozen=True)
class _Candidate:
    split: str
    index: int
    attempt: int
    spec: GameSpec
    plan: tuple[str, ...]
    folder: str
    trial: str
    seed: int


def _candidate(
    split: str, index: int, attempt: int, seed: int, task_type: str, scenes: Sequence[int]
) -> _Candidate | None:
    game_seed = random.Random(f"agentrl:{seed}:{split}:{index}:{attempt}").randrange(2**31)
    rng = random.Random(game_seed)
    spec = build_game(task_type, scenes, rng)
    if spec is None:
        return None
    trial = f"trial_agentrl_s{seed}_{split}_{index:05d}_a{attempt}"
    world = parse_world(problem_pddl(spec, f"plan_{trial}"))
    task = ExpertTask(task_type, spec.object_target, spec.parent_target, spec.toggle_target)
    plan = expert_plan(world, task)
    if plan is None:
        return None
    target = spec.parent_target or spec.toggle_target
    folder = f"{task_type}-{spec.object_target}-None-{target}-{spec.scene.number}"
    return _Candidate(split, index, attempt, spec, tuple(plan), folder, trial, game_seed)


def _write(candidate: _Candidate, trial_dir: Path) -> None:
    """Write the candidate's two files into `trial_dir` (created)."""
    from agentrl._optional import require

    alfworld_info = require("alfworld", "alfworld", "ALFWorld game generation")
    data_dir = Path(str(alfworld_info.__file__)).parent / "data"
    spec = candidate.spec
    grammar = (data_dir / "alfred.twl2").read_text().replace("UNKNOWN GOAL", spec.description)
    game = {
        "pddl_domain": (data_dir / "alfred.pddl").read_text(),
        "grammar": grammar,
        "pddl_problem": problem_pddl(spec, f"plan_{candidate.trial}"),
        "solvable": True,
        "walkthrough": list(candidate.plan),
    }
    traj = {
        "task_id": candidate.trial,
        "task_type": spec.task_type,
        "pddl_params": {
            "mrecep_target": "",
            "object_sliced": False,
            "object_target": spec.object_target,
            "parent_target": spec.parent_target,
            "toggle_target": spec.toggle_target,
        },
        "scene": {
            "floor_plan": f"FloorPlan{spec.scene.number}",
            "random_seed": candidate.seed,
            "scene_num": spec.scene.number,
        },
        "turk_annotations": {"anns": [{"task_desc": spec.description}]},
        "generator": "agentrl",
    }
    trial_dir.mkdir(parents=True, exist_ok=True)
    (trial_dir / GAME_FILE).write_text(json.dumps(game), encoding="utf-8")
    (trial_dir / TRAJ_FILE).write_text(json.dumps(traj, indent=2), encoding="utf-8")


def _task_order(split: str, seed: int, task_types: Sequence[str]) -> list[str]:
    order = list(task_types)
    random.Random(f"agentrl:{seed}:{split}:order").shuffle(order)
    return order


async def _generate_one(
    worker: object,
    root: Path,
    split: str,
    index: int,
    seed: int,
    task_type: str,
    scenes: Sequence[int],
    timeout: float,
    max_attempts: int,
    failures: list[str],
    verify_engine: str,
) -> GameExample | None:
    from agentrl.envs.alfworld.workers import CallWorker, WorkerFailure

    assert isinstance(worker, CallWorker)
    json_dir = root / JSON_DIR
    staging = root / ".staging"
    for attempt in range(max_attempts):
        candidate = _candidate(split, index, attempt, seed, task_type, scenes)
        if candidate is None:
            failures.append(f"{split}[{index}] attempt {attempt}: no {task_type} game fits")
            continue
        final = json_dir / split / candidate.folder / candidate.trial
        if (final / GAME_FILE).is_file() and (final / TRAJ_FILE).is_file():
            return read_game(final, split, root)  # resumed: written by an earlier run
        tmp = staging / candidate.trial
        shutil.rmtree(tmp, ignore_errors=True)
        _write(candidate, tmp)
        try:
            result = await worker.call(
                "agentrl.envs.alfworld.generate:verify_game",
                (str(tmp / GAME_FILE), verify_engine),
                timeout,
            )
            error = result.error if not result.won else None
        except (WorkerFailure, RuntimeError) as exc:
            error = str(exc)
        if error is not None:
            failures.append(f"{split}[{index}] attempt {attempt} ({candidate.folder}): {error}")
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)
        return read_game(final, split, root)
    return None


async def _generate_all(
    root: Path,
    counts: Mapping[str, int],
    seed: int,
    task_types: Sequence[str],
    pools: Mapping[str, Sequence[int]],
    workers: int,
    timeout: float,
    max_attempts: int,
    progress: bool,
    verify_engine: str,
) -> tuple[list[GameExample], list[str]]:
    from tqdm import tqdm  # type: ignore[import-untyped]

    from agentrl.envs.alfworld.workers import CallWorker

    jobs: asyncio.Queue[tuple[str, int, str]] = asyncio.Queue()
    for split in SPLITS:
        order = _task_order(split, seed, task_types)
        for index in range(counts.get(split, 0)):
            jobs.put_nowait((split, index, order[index % len(order)]))
    games: list[GameExample] = []
    failures: list[str] = []
    bar = tqdm(
        total=jobs.qsize(), desc="generating ALFWorld games", unit="game", disable=not progress
    )

    async def run_worker() -> None:
        worker = CallWorker()
        try:
            while not jobs.empty():
                split, index, task_type = jobs.get_nowait()
                game = await _generate_one(
                    worker,
                    root,
                    split,
                    index,
                    seed,
                    task_type,
                    pools[split],
                    timeout,
                    max_attempts,
                    failures,
                    verify_engine,
                )
                if game is not None:
                    games.append(game)
                bar.update(1)
        finally:
            await worker.close()

    try:
        await asyncio.gather(*(run_worker() for _ in range(max(1, workers))))
    finally:
        bar.close()
    return sorted(games, key=lambda g: g.id), failures


def generate_games(
    out: str | os.PathLike[str],
    *,
    train: int = 0,
    valid_seen: int = 0,
    valid_unseen: int = 0,
    seed: int = 0,
    task_types: Sequence[str] = TASK_TYPES,
    max_receptacles: int | None = None,
    workers: int | None = None,
    timeout: float = 120.0,
    max_attempts: int = 5,
    progress: bool = True,
    verify_engine: str = "textworld",
) -> GenerationReport:
    """Generate and verify games into `out` (the data root); see the module docstring.

    Task types cycle through `task_types` (in a seeded order per split), so any 6
    consecutive games of a split cover all six types. `max_receptacles` keeps to the floor
    plans with at most that many receptacles (`scene_pool`). `workers` verification processes run
    in parallel (default: the CPU count, at most 4); `timeout` bounds each verification.
    `verify_engine` plays each walkthrough: the stock TextWorld engine (default) or "fast",
    the engine the env plays with by default (byte-identical steps, about 5x quicker to load a
    game; `agentrl.envs.alfworld.engine.ENGINES`).
    """
    from agentrl.envs.alfworld.engine import engine_target

    engine_target(verify_engine)  # an unknown name fails here, naming the engines
    counts = {"train": train, "valid_seen": valid_seen, "valid_unseen": valid_unseen}
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"game counts must be >= 0, got {counts}")
    unknown = [t for t in task_types if t not in TASK_TYPES]
    if unknown or not task_types:
        raise ValueError(f"unknown task types {unknown}; expected a subset of {TASK_TYPES}")
    pools = {split: scene_pool(split, max_receptacles) for split in SPLITS}
    for split, n in counts.items():
        if n and not pools[split]:
            raise ValueError(
                f"max_receptacles={max_receptacles}: no {split} floor plan has that few "
                "receptacles (the smallest have 6); raise it"
            )
    root = Path(out).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    n_workers = workers if workers is not None else min(4, os.cpu_count() or 1)

    def work() -> tuple[list[GameExample], list[str]]:
        return asyncio.run(
            _generate_all(
                root,
                counts,
                seed,
                task_types,
                pools,
                n_workers,
                timeout,
                max_attempts,
                progress,
                verify_engine,
            )
        )

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no event loop in this thread
        games, failures = work()
    else:  # called from async code (e.g. a notebook): run on a thread of its own
        with ThreadPoolExecutor(1) as pool:
            games, failures = pool.submit(work).result()
    shutil.rmtree(root / ".staging", ignore_errors=True)
    report = GenerationReport(
        root=root,
        games=tuple(games),
        discarded=len(failures),
        seconds=time.perf_counter() - started,
        failures=tuple(failures),
    )
    manifest = {
        "generator": "agentrl",
        "seed": seed,
        "requested": counts,
        "task_types": list(task_types),
        "max_receptacles": max_receptacles,
        "verify_engine": verify_engine,
        "counts": report.counts(),
        "discarded": report.discarded,
        "games": [g.id for g in games],
    }
    (root / "generation.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return report
