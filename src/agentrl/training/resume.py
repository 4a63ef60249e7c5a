"""Resuming a training run: same settings, a loadable checkpoint, no update recorded twice.

`agentrl train --resume` (or `TrainConfig.resume`) continues the latest checkpoint of the run
folder. Before it does:

- `run.json` must describe the same game order (seed, batch, group size, games);
- the checkpoint is validated while it loads; a damaged one raises `CheckpointError` naming
  the file and the previous checkpoint, and with `resume_fallback` it is set aside
  (`update-NNNN.json.damaged`) and the previous one is used;
- records of updates after the checkpoint (written before a crash, never checkpointed) are
  dropped from `metrics.jsonl` and `rollouts.jsonl`, so the replayed updates appear once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from agentrl.backends.base import TrainingBackend
from agentrl.config import TrainConfig
from agentrl.core.errors import CheckpointError
from agentrl.core.types import JsonObject, TaskInfo
from agentrl.store.jsonl import drop_records
from agentrl.training.checkpoints import (
    CHECKPOINTS_DIR,
    METRICS_FILE,
    ROLLOUTS_FILE,
    RUN_FILE,
    CheckpointInfo,
    check_run_dir,
)

__all__ = [
    "ORDER_FIELDS",
    "check_same_run",
    "drop_unsaved_records",
    "load_latest",
    "read_run_file",
    "run_state",
    "start_run",
    "write_run_file",
]

log = logging.getLogger(__name__)

ORDER_FIELDS = ("seed", "games_per_batch", "group_size")
"""Settings a resumed run must share with the run it continues."""


def read_run_file(path: Path) -> JsonObject:
    """`run.json` as an object, or a ValueError naming the file and the fix."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: not valid JSON ({exc}); it records the run's settings: restore it, "
            "delete it to resume without the settings check, or start another --run-dir"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def write_run_file(path: Path, state: JsonObject) -> None:
    """Write `run.json` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def check_same_run(run_dir: Path, before: JsonObject, now: JsonObject) -> None:
    """Refuse to resume when the game order would change (names the differing flags)."""
    old, new = before.get("config"), now["config"]
    assert isinstance(new, dict)
    problems = []
    if isinstance(old, dict):
        problems = [
            f"--{k.replace('_', '-')} {old.get(k)} -> {new.get(k)}"
            for k in ORDER_FIELDS
            if old.get(k) != new.get(k)
        ]
    if before.get("tasks_fingerprint") != now["tasks_fingerprint"]:
        problems.append(f"training games changed ({before.get('tasks')} -> {now['tasks']})")
    if problems:
        raise ValueError(
            f"cannot resume {run_dir}: the game order would change: " + "; ".join(problems)
        )


def _records(run_dir: Path) -> list[tuple[Path, CheckpointInfo | CheckpointError]]:
    """Every checkpoint record, readable ones by update (newest first), unreadable first."""
    readable: list[tuple[Path, CheckpointInfo | CheckpointError]] = []
    broken: list[tuple[Path, CheckpointInfo | CheckpointError]] = []
    for path in sorted((run_dir / CHECKPOINTS_DIR).glob("*.json")):
        try:
            readable.append((path, CheckpointInfo.read(path)))
        except CheckpointError as exc:
            broken.append((path, exc))
    readable.sort(key=lambda item: -item[1].update if isinstance(item[1], CheckpointInfo) else 0)
    return broken + readable


def _set_aside(record: Path) -> Path:
    aside = record.with_name(record.name + ".damaged")
    os.replace(record, aside)
    return aside


async def load_latest(
    backend: TrainingBackend, run_dir: Path, *, fallback: bool
) -> CheckpointInfo | None:
    """Load the newest loadable checkpoint of `run_dir` into `backend` (None: there is none).

    A damaged newest checkpoint raises `CheckpointError` (naming the file and the previous
    checkpoint) unless `fallback`, which sets it aside and tries the one before.
    """
    records = _records(run_dir)
    for index, (path, info) in enumerate(records):
        try:
            if isinstance(info, CheckpointError):
                raise info
            await backend.load(info.ref)
            return info
        except CheckpointError as exc:
            rest = [i for _, i in records[index + 1 :] if isinstance(i, CheckpointInfo)]
            if not fallback:
                previous = (
                    f"pass --resume-fallback to set it aside and continue from {rest[0].name} "
                    f"(update {rest[0].update})"
                    if rest
                    else "there is no earlier checkpoint: start a new --run-dir"
                )
                raise CheckpointError(
                    exc.path,
                    f"{exc.problem}. The latest checkpoint ({path.name}) is damaged; " + previous,
                ) from exc
            aside = _set_aside(path)
            log.warning("checkpoint %s is damaged (%s); set aside as %s", path, exc, aside.name)
            print(f"warning: {exc}; set aside as {aside.name}, trying the previous checkpoint")
    return None


def drop_unsaved_records(run_dir: Path, last_update: int) -> int:
    """Drop metrics / rollout records of updates after `last_update`; returns how many."""
    dropped = drop_records(run_dir / METRICS_FILE, lambda r: _number(r.get("step")) > last_update)
    dropped += drop_records(
        run_dir / ROLLOUTS_FILE, lambda r: _number(_extra(r).get("update")) > last_update
    )
    if dropped:
        log.warning(
            "dropped %d records of updates after %d (not checkpointed; they are replayed)",
            dropped,
            last_update,
        )
    return dropped


def _extra(record: JsonObject) -> JsonObject:
    extra = record.get("extra")
    return extra if isinstance(extra, dict) else {}


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _fingerprint(tasks: Sequence[TaskInfo]) -> str:
    ids = sorted(f"{t.split}/{t.task_id}" for t in tasks)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def run_state(config: TrainConfig, tasks: Sequence[TaskInfo], chat: JsonObject) -> JsonObject:
    """What `run.json` records of a run: its config, its games (count and fingerprint) and the
    chat renderer's record."""
    return {
        "config": config.model_dump(mode="json"),
        "tasks": len(tasks),
        "tasks_fingerprint": _fingerprint(tasks),
        "chat": chat,
    }


async def start_run(
    backend: TrainingBackend, config: TrainConfig, state: JsonObject
) -> CheckpointInfo | None:
    """Start a run, or resume it: a fresh run checks that the folder holds no other run and
    writes `run.json`; with `resume`, the folder must hold the same run, its latest checkpoint
    is loaded (returned; None: nothing to resume, start at update 1) and the records of
    updates after it are dropped."""
    run_dir = Path(config.run_dir)
    run_file = run_dir / RUN_FILE
    if not config.resume:
        check_run_dir(config)
        write_run_file(run_file, state)
        return None
    if run_file.exists():
        check_same_run(run_dir, read_run_file(run_file), state)
    else:
        write_run_file(run_file, state)
    latest = await load_latest(backend, run_dir, fallback=config.resume_fallback)
    drop_unsaved_records(run_dir, 0 if latest is None else latest.update)
    return latest
