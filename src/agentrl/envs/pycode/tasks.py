"""The task generator of the Python-interpreter environment: seeded, offline, disjoint splits.

A task id names everything needed to rebuild its problem (`pycode/<split>/<family>/<index>`),
so tasks need no files; `write_tasks` still writes them as JSONL for other tools. Splits:

- `train`: the families bignum, modular, combinatorics and sequences;
- `valid_seen`: the same families and parameter ranges, other seeds, and no question that is in
  the train pool (the first `TRAIN_POOL` train tasks of each family);
- `valid_unseen`: the families dates and strings (never in train) and the train families drawn
  from larger parameter ranges (`hard`).
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

from agentrl.core.types import TaskInfo
from agentrl.envs.pycode.families import FAMILIES, Problem

__all__ = [
    "SPLIT_FAMILIES",
    "TRAIN_FAMILIES",
    "TRAIN_POOL",
    "UNSEEN_FAMILIES",
    "problem_for",
    "pycode_tasks",
    "write_tasks",
]

TRAIN_FAMILIES = ("bignum", "modular", "combinatorics", "sequences")
UNSEEN_FAMILIES = ("dates", "strings")
SPLIT_FAMILIES = {
    "train": TRAIN_FAMILIES,
    "valid_seen": TRAIN_FAMILIES,
    "valid_unseen": (*UNSEEN_FAMILIES, *TRAIN_FAMILIES),
}
TRAIN_POOL = 1000
"""Train tasks per family that validation questions are kept apart from (the train cap)."""


def _draw(split: str, family: str, index: int) -> Problem:
    hard = split == "valid_unseen" and family in TRAIN_FAMILIES
    rng = random.Random(f"pycode:{split}:{family}:{index}")
    return FAMILIES[family](rng, hard)


def problem_for(task_id: str) -> Problem:
    """The problem a task id names (raises ValueError naming the expected form)."""
    parts = task_id.split("/")
    if len(parts) != 4 or parts[0] != "pycode" or not parts[3].isdigit():
        raise ValueError(f"{task_id!r} is not a pycode task id (pycode/<split>/<family>/<index>)")
    _, split, family, index = parts
    if split not in SPLIT_FAMILIES or family not in SPLIT_FAMILIES[split]:
        raise ValueError(f"{task_id!r}: no family {family!r} in split {split!r}")
    return _draw(split, family, int(index))


@functools.cache
def _train_questions(family: str) -> frozenset[str]:
    return frozenset(_draw("train", family, i).question for i in range(TRAIN_POOL))


def _task(split: str, family: str, index: int, problem: Problem) -> TaskInfo:
    return TaskInfo(
        task_id=f"pycode/{split}/{family}/{index}",
        task_type=family,
        description=problem.question,
        split=split,
    )


def pycode_tasks(split: str, count: int) -> list[TaskInfo]:
    """The first `count` tasks of `split`, families taken in turn (deterministic)."""
    if split not in SPLIT_FAMILIES:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(SPLIT_FAMILIES)}")
    families = SPLIT_FAMILIES[split]
    if split == "train" and count > TRAIN_POOL * len(families):
        raise ValueError(f"the train split has at most {TRAIN_POOL * len(families)} tasks")
    tasks: list[TaskInfo] = []
    next_index = dict.fromkeys(families, 0)
    turn = 0
    while len(tasks) < count:
        family = families[turn % len(families)]
        turn += 1
        while True:
            index = next_index[family]
            next_index[family] += 1
            problem = _draw(split, family, index)
            if split != "valid_seen" or problem.question not in _train_questions(family):
                break
        tasks.append(_task(split, family, index, problem))
    return tasks


def write_tasks(out: Path, counts: dict[str, int]) -> list[Path]:
    """Write `<split>.jsonl` per split (task_id, split, family, question, answer, code)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for split, count in counts.items():
        path = out / f"{split}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for task in pycode_tasks(split, count):
                problem = problem_for(task.task_id)
                record = {
                    "task_id": task.task_id,
                    "split": split,
                    "family": problem.family,
                    "question": problem.question,
                    "answer": problem.answer,
                    "code": problem.code,
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        written.append(path)
    return written
