"""A tiny deterministic household task: carry one object to a target receptacle.

The room has a few places; one object lies at one of them. The agent wins by taking the
object and moving it to the target (3-4 correct commands, ALFWorld-style phrasing:
`go to shelf 1`, `take apple 1 from shelf 1`, `move apple 1 to box 1`). It loses when the
step limit is reached or when it `drop`s the object (it breaks). Every task is fully
determined by its seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentrl.core.env import command_of
from agentrl.core.types import EnvAction, EnvStep, TaskInfo

__all__ = ["ToyEnvGroup", "ToyState", "ToyTask", "make_toy_group", "toy_task", "toy_tasks"]

OBJECTS = ("apple", "mug", "book", "key", "pen", "cup")
PLACES = ("shelf", "table", "drawer", "counter", "desk", "bed")
TARGETS = ("box", "basket", "bin")


@dataclass(frozen=True)
class ToyTask:
    """The static facts of one toy game."""

    obj: str
    places: tuple[str, ...]
    object_place: str
    target: str
    start: str
    max_steps: int

    @property
    def description(self) -> str:
        """The task sentence shown to the agent."""
        return f"put the {self.obj} in the {self.target}."


@dataclass(frozen=True)
class ToyState:
    """Mutable facts of one branch, as an immutable value."""

    location: str
    object_at: str | None
    """Where the object lies, or None when the agent holds it."""
    steps: int = 0
    won: bool = False
    lost: bool = False


def toy_task(seed: int, max_steps: int = 8) -> ToyTask:
    """The toy game for `seed`."""
    rng = random.Random(seed)
    obj = f"{rng.choice(OBJECTS)} 1"
    places = tuple(f"{p} 1" for p in rng.sample(PLACES, 3))
    target = f"{rng.choice(TARGETS)} 1"
    object_place = rng.choice(places)
    start = rng.choice(("middle of the room", *places))
    return ToyTask(obj, places, object_place, target, start, max_steps)


def toy_tasks(count: int, seed: int = 0, split: str = "train") -> list[TaskInfo]:
    """`count` toy tasks as `TaskInfo` records (task_id encodes the seed)."""
    return [
        TaskInfo(
            task_id=f"toy-{seed + i}",
            task_type="toy_carry",
            description=toy_task(seed + i).description,
            split=split,
        )
        for i in range(count)
    ]


def _seed_of(task: TaskInfo) -> int:
    prefix = "toy-"
    if not task.task_id.startswith(prefix) or not task.task_id[len(prefix) :].isdigit():
        raise ValueError(
            f"toy task id must look like 'toy-<seed>', got {task.task_id!r}; "
            "build tasks with agentrl.envs.toy.toy_tasks()"
        )
    return int(task.task_id[len(prefix) :])


def admissible_actions(task: ToyTask, state: ToyState) -> tuple[str, ...]:
    """Commands executable in `state`, in a stable order."""
    actions = [f"go to {p}" for p in (*task.places, task.target) if p != state.location]
    if state.object_at is not None and state.object_at == state.location:
        actions.append(f"take {task.obj} from {state.location}")
    if state.object_at is None:
        if state.location in task.places or state.location == task.target:
            actions.append(f"move {task.obj} to {state.location}")
        actions.append(f"drop {task.obj}")
    actions.extend(("look", "inventory"))
    return tuple(actions)


def describe(task: ToyTask, state: ToyState) -> str:
    """What the agent sees in `state`."""
    if state.location == "middle of the room":
        where = "You are in the middle of a room."
    else:
        where = f"You arrive at {state.location}."
    here = (
        f" On the {state.location}, you see a {task.obj}."
        if state.object_at == state.location
        else f" On the {state.location}, you see nothing."
        if state.location != "middle of the room"
        else ""
    )
    places = ", ".join((*task.places, task.target))
    return f"{where}{here} Looking around, you see: {places}."


def transition(task: ToyTask, state: ToyState, action: str) -> tuple[ToyState, str, bool]:
    """Apply `action`; return the new state, the feedback text and whether it was admissible."""
    if action not in admissible_actions(task, state):
        return replace(state, steps=state.steps + 1), "Nothing happens.", False
    steps = state.steps + 1
    if action.startswith("go to "):
        new = replace(state, location=action[len("go to ") :], steps=steps)
        return new, describe(task, new), True
    if action.startswith("take "):
        new = replace(state, object_at=None, steps=steps)
        return new, f"You pick up the {task.obj} from the {state.location}.", True
    if action.startswith("move "):
        won = state.location == task.target
        new = replace(state, object_at=state.location, steps=steps, won=won)
        return new, f"You move the {task.obj} to the {state.location}.", True
    if action.startswith("drop "):
        new = replace(state, object_at=state.location, steps=steps, lost=True)
        return new, f"You drop the {task.obj}. It breaks.", True
    if action == "inventory":
        held = f"a {task.obj}" if state.object_at is None else "nothing"
        return replace(state, steps=steps), f"You are carrying: {held}.", True
    return replace(state, steps=steps), describe(task, state), True


def state_key(task: ToyTask, state: ToyState) -> str:
    """A short hash of the branch state (equal states give equal keys)."""
    raw = f"{task}|{state.location}|{state.object_at}|{state.won}|{state.lost}"
    return hashlib.sha1(raw.encode()).hexdigest()[:16]


class ToyEnvGroup:
    """K branches of one toy task. Pure Python, synchronous work behind async methods."""

    def __init__(self, task: TaskInfo, group_size: int, max_steps: int = 8) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self._task_info = task
        self._game = toy_task(_seed_of(task), max_steps=max_steps)
        self._size = group_size
        self._states: list[ToyState] = []
        self._steps: list[EnvStep] = []
        self._closed = False

    @property
    def task(self) -> TaskInfo:
        """The task these branches play."""
        return self._task_info

    @property
    def size(self) -> int:
        """Number of branches."""
        return self._size

    def _step_record(self, state: ToyState, text: str, admissible: bool) -> EnvStep:
        ended = state.won or state.lost
        truncated = not ended and state.steps >= self._game.max_steps
        done = ended or truncated
        return EnvStep(
            observation=text,
            score=1.0 if state.won else 0.0,
            done=done,
            won=state.won,
            admissible=admissible,
            admissible_actions=() if done else admissible_actions(self._game, state),
            state_key=state_key(self._game, state),
            info={"env_steps": state.steps, "truncated": truncated},
        )

    async def reset(self) -> list[EnvStep]:
        """Start all branches at the task's initial state."""
        self._check_open()
        start = ToyState(location=self._game.start, object_at=self._game.object_place)
        intro = f"{describe(self._game, start)} Your task is to: {self._game.description}"
        self._states = [start] * self._size
        self._steps = [self._step_record(start, intro, True)] * self._size
        return list(self._steps)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Advance branches whose action is not None."""
        self._check_open()
        if not self._steps:
            raise RuntimeError("ToyEnvGroup.step() called before reset()")
        if len(actions) != self._size:
            raise ValueError(f"expected {self._size} actions, got {len(actions)}")
        for i, action in enumerate(actions):
            if action is None or self._steps[i].finished:
                continue
            command = command_of(action).strip().lower()
            state, text, ok = transition(self._game, self._states[i], command)
            self._states[i] = state
            self._steps[i] = self._step_record(state, text, ok)
        return list(self._steps)

    async def close(self) -> None:
        """Nothing to release; idempotent."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("ToyEnvGroup is closed")


def make_toy_group(task: TaskInfo, group_size: int) -> ToyEnvGroup:
    """`EnvGroupFactory` for toy tasks."""
    return ToyEnvGroup(task, group_size)
