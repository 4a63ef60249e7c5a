"""Relabelled ALFWorld games: the same game under new instance numbers and listing order.

A small model imitating the explorer on a few dozen floor plans memorises each room (its
receptacles, their numbers, the order it searches them) instead of reading them from the first
observation, and then names receptacles an unseen room does not have. A relabelled copy of a
game is the same game seen through a consistent renaming: every `class N` name (`drawer 2`,
`alarmclock 1`) becomes `class p(N)` for a permutation `p` of 1..`RELABEL_NUMBERS` drawn per
class, and, optionally, the first observation lists the room's receptacles in a shuffled order. The
agent's commands are renamed back before the game sees them, so everything the copy answers is
what the real game answers: the explorer's episodes on copies are valid demonstrations, and
with `SearchOrder` "listed" they search in the shuffled order. Only the text changes: the
floor plan, the objects and where they are stay the game's own.

`relabeled_tasks(tasks, copies)` names the copies (`<task_id>#relabel-<k>`); a
`RelabelingFactory(inner, seed)` around any ALFWorld group factory plays such a task through
its renaming (every other task as it is). Each copy's renaming is a pure function of (`seed`,
task id, copy): no draw depends on the order groups are built or played.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from agentrl.core.env import (
    ClosableEnvFactory,
    EnvGroup,
    EnvGroupFactory,
    EnvGroupWrapper,
    close_env_factory,
)
from agentrl.core.types import EnvAction, EnvStep, TaskInfo, ToolCall

__all__ = [
    "RELABEL_MARK",
    "RELABEL_NUMBERS",
    "Relabel",
    "RelabeledGroup",
    "RelabelingFactory",
    "relabel_of",
    "relabeled_tasks",
]

RELABEL_MARK = "#relabel-"
"""Separates a copy's task id from its copy number (`<task_id>#relabel-<k>`)."""
RELABEL_NUMBERS = 9
"""Numbers 1..this are permuted among themselves (`Relabel.numbers`); larger ones are kept.
9: every renamed number stays one digit, as the small rooms' own numbers are."""
_NAME_RE = re.compile(r"\b([a-z]+) (\d+)\b")
_ITEM = r"an? [a-z]+ \d+"
_LISTING_RE = re.compile(rf"(you see )({_ITEM}(?:, {_ITEM})*,? and {_ITEM})(\.)")
_ITEM_RE = re.compile(_ITEM)


@dataclass(frozen=True)
class Relabel:
    """One copy's renaming: instance numbers permuted per class, the listing shuffled."""

    key: str
    """Seeds every draw (a class's permutation, the listing's order)."""
    numbers: int = RELABEL_NUMBERS
    """Numbers 1..`numbers` are permuted among themselves; larger ones are kept."""
    shuffle_listing: bool = True
    """Shuffle the order in which the first observation lists the room's receptacles."""

    def __post_init__(self) -> None:
        if self.numbers < 1:
            raise ValueError(f"Relabel.numbers must be >= 1, got {self.numbers}")

    def number(self, kind: str, number: int, inverse: bool = False) -> int:
        """The number `number` of class `kind` becomes (or, `inverse`, came from)."""
        if not 1 <= number <= self.numbers:
            return number
        order = _permutation(self.key, kind, self.numbers)
        return order.index(number) + 1 if inverse else order[number - 1]

    def _rename(self, text: str, inverse: bool) -> str:
        def one(match: re.Match[str]) -> str:
            kind, number = match.group(1), int(match.group(2))
            return f"{kind} {self.number(kind, number, inverse)}"

        return _NAME_RE.sub(one, text)

    def observation(self, text: str, first: bool = False) -> str:
        """`text` as the copy shows it (`first`: the first observation, whose listing is
        shuffled when `shuffle_listing`)."""
        renamed = self._rename(text, inverse=False)
        if not (first and self.shuffle_listing):
            return renamed

        def shuffled(match: re.Match[str]) -> str:
            items = _ITEM_RE.findall(match.group(2))
            random.Random(f"{self.key}:listing").shuffle(items)
            return f"{match.group(1)}{', '.join(items[:-1])}, and {items[-1]}{match.group(3)}"

        return _LISTING_RE.sub(shuffled, renamed, count=1)

    def command(self, text: str) -> str:
        """An agent's command in the copy's names renamed back to the game's."""
        return self._rename(text, inverse=True)


@lru_cache(maxsize=4096)
def _permutation(key: str, kind: str, numbers: int) -> tuple[int, ...]:
    """Class `kind`'s permutation of 1..`numbers` under `key` (drawn once, then reused for
    every name of every observation)."""
    order = list(range(1, numbers + 1))
    random.Random(f"{key}:{kind}").shuffle(order)
    return tuple(order)


def relabel_of(
    task: TaskInfo, seed: int, numbers: int = RELABEL_NUMBERS, shuffle_listing: bool = True
) -> Relabel | None:
    """The renaming of a copy named by `relabeled_tasks` (None for any other task)."""
    if RELABEL_MARK not in task.task_id:
        return None
    key = zlib.crc32(f"{seed}:{task.task_id}".encode())
    return Relabel(key=str(key), numbers=numbers, shuffle_listing=shuffle_listing)


def relabeled_tasks(tasks: Sequence[TaskInfo], copies: int) -> list[TaskInfo]:
    """`copies` relabelled copies of each task (ids `<task_id>#relabel-<k>`, k = 0..copies-1),
    task by task; play them through a `RelabelingFactory`."""
    if copies < 0:
        raise ValueError(f"copies must be >= 0, got {copies}")
    return [
        replace(task, task_id=f"{task.task_id}{RELABEL_MARK}{k}")
        for task in tasks
        for k in range(copies)
    ]


def _renamed_action(action: EnvAction, relabel: Relabel) -> EnvAction:
    if isinstance(action, str):
        return relabel.command(action)
    return tuple(
        ToolCall(
            call.name, {name: relabel.command(value) for name, value in call.arguments.items()}
        )
        for call in action
    )


def _shown(step: EnvStep, relabel: Relabel, first: bool) -> EnvStep:
    return replace(
        step,
        observation=relabel.observation(step.observation, first),
        admissible_actions=tuple(relabel.observation(a) for a in step.admissible_actions),
        outputs=tuple(relabel.observation(o) for o in step.outputs),
    )


class RelabeledGroup(EnvGroupWrapper):
    """An `EnvGroup` playing `inner`'s game through `relabel` (every branch the same)."""

    def __init__(self, inner: EnvGroup, relabel: Relabel) -> None:
        super().__init__(inner)
        self.relabel = relabel

    async def reset(self) -> list[EnvStep]:
        """Reset the game; the first observations in the copy's names and listing order."""
        return [_shown(s, self.relabel, first=True) for s in await self.inner.reset()]

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Rename the commands back, step the game, rename what it answers."""
        inner = [None if a is None else _renamed_action(a, self.relabel) for a in actions]
        return [_shown(s, self.relabel, first=False) for s in await self.inner.step(inner)]


class RelabelingFactory:
    """Builds `inner`'s group of a task; a copy named by `relabeled_tasks` is played through
    its renaming (`relabel_of(task, seed, numbers, shuffle_listing)`). `close()` closes
    `inner`."""

    def __init__(
        self,
        inner: EnvGroupFactory | ClosableEnvFactory,
        seed: int,
        numbers: int = RELABEL_NUMBERS,
        shuffle_listing: bool = True,
    ) -> None:
        self.inner = inner
        self.seed = seed
        self.numbers = numbers
        self.shuffle_listing = shuffle_listing

    def __call__(self, task: TaskInfo, group_size: int) -> EnvGroup:
        relabel = relabel_of(task, self.seed, self.numbers, self.shuffle_listing)
        if relabel is None:
            return self.inner(task, group_size)
        return RelabeledGroup(self.inner(task, group_size), relabel)

    async def close(self) -> None:
        """Close the inner factory (when it holds something)."""
        await close_env_factory(self.inner)
