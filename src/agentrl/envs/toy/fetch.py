"""A toy task that must be *read* to be won: fetch the named object and put it in the named bin.

Every observation ends with the goal (`Your task is to: put the mug 1 in the basket 1.`), and
`FetchCommands` shows it last, after the actions, right before the reply. A table holds the goal
object and distractor objects; there are several receptacles. Step 1 is one of
`take OBJECT` (one per object on the table, in a per-game shuffled order); step 2 is one of
`put OBJECT in RECEPTACLE`. The episode ends with the put: it is won only when both the object
and the receptacle are the ones the goal names. A uniformly random *valid* policy therefore
wins `1 / (objects * receptacles)` of the episodes (11% with the default 3 x 3; 25% with the
learning benchmark's 4 x 1, where step 2 has one choice), and nothing but the goal sentence
tells the goal object from the distractors. The names are always the first `objects` objects and
`receptacles` receptacles (in a per-game order): a small model learns to write valid commands
from a few demonstrations, and what it must learn by RL is to read the goal. Every game is
fully determined by its seed.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentrl.core.env import EnvGroupFactory, command_of
from agentrl.core.types import EnvAction, EnvStep, Message, TaskInfo, TurnStatus
from agentrl.envs.toy.env import OBJECTS
from agentrl.envs.toy.plain import ACTIONS_HEADING, PlainCommands
from agentrl.tools import ToolResult

__all__ = [
    "FETCH_RECEPTACLES",
    "FetchCommands",
    "FetchEnvGroup",
    "FetchTask",
    "fetch_group_factory",
    "fetch_solution",
    "fetch_task",
    "fetch_tasks",
    "random_valid_success",
]

FETCH_RECEPTACLES = ("box", "basket", "bin", "crate")
PREFIX = "fetch-"


@dataclass(frozen=True)
class FetchTask:
    """The static facts of one fetch game."""

    goal: str
    """The object to fetch (`mug 1`)."""
    target: str
    """The receptacle to put it in (`basket 1`)."""
    objects: tuple[str, ...]
    """The objects on the table (goal included), in the order the actions list them."""
    receptacles: tuple[str, ...]
    """The receptacles (target included), in the order the actions list them."""

    @property
    def description(self) -> str:
        """The goal sentence shown to the agent."""
        return f"put the {self.goal} in the {self.target}."


def fetch_task(seed: int, objects: int = 3, receptacles: int = 3) -> FetchTask:
    """The fetch game for `seed` with `objects` objects and `receptacles` receptacles."""
    if not 1 <= objects <= len(OBJECTS) or not 1 <= receptacles <= len(FETCH_RECEPTACLES):
        raise ValueError(
            f"need 1..{len(OBJECTS)} objects and 1..{len(FETCH_RECEPTACLES)} receptacles, "
            f"got {objects} and {receptacles}"
        )
    rng = random.Random(seed)
    items = tuple(f"{o} 1" for o in rng.sample(OBJECTS[:objects], objects))
    places = tuple(f"{r} 1" for r in rng.sample(FETCH_RECEPTACLES[:receptacles], receptacles))
    return FetchTask(
        goal=rng.choice(items), target=rng.choice(places), objects=items, receptacles=places
    )


def fetch_solution(task: TaskInfo) -> str:
    """The commands that win a fetch game, as a sentence (self-distillation's privileged
    context); read from the task's goal, which names both the object and the receptacle."""
    goal = task.description.removeprefix("put the ").removesuffix(".")
    thing, _, place = goal.partition(" in the ")
    if not thing or not place:
        raise ValueError(f"{task.task_id}: not a fetch goal: {task.description!r}")
    return f"The solution: take {thing}, then put {thing} in {place}."


def random_valid_success(objects: int = 3, receptacles: int = 3) -> float:
    """Exact success rate of a policy choosing uniformly among the valid actions."""
    return 1.0 / (objects * receptacles)


def fetch_tasks(
    count: int, seed: int = 0, split: str = "train", objects: int = 3, receptacles: int = 3
) -> list[TaskInfo]:
    """`count` fetch games (seeds `seed`, `seed + 1`, ...) as `TaskInfo` records."""
    return [
        TaskInfo(
            task_id=f"{PREFIX}{seed + i}",
            task_type="toy_fetch",
            description=fetch_task(seed + i, objects, receptacles).description,
            split=split,
        )
        for i in range(count)
    ]


def _seed_of(task: TaskInfo) -> int:
    tail = task.task_id[len(PREFIX) :]
    if not task.task_id.startswith(PREFIX) or not tail.isdigit():
        raise ValueError(
            f"fetch task id must look like 'fetch-<seed>', got {task.task_id!r}; "
            "build tasks with agentrl.envs.toy.fetch_tasks()"
        )
    return int(tail)


@dataclass(frozen=True)
class _Branch:
    held: str | None = None
    steps: int = 0
    done: bool = False
    won: bool = False


class FetchEnvGroup:
    """K branches of one fetch game. Pure Python, synchronous work behind async methods."""

    def __init__(
        self,
        task: TaskInfo,
        group_size: int,
        *,
        objects: int = 3,
        receptacles: int = 3,
        max_steps: int = 3,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self._task_info = task
        self._game = fetch_task(_seed_of(task), objects, receptacles)
        self._size = group_size
        self._max_steps = max_steps
        self._branches: list[_Branch] = []
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

    def _actions(self, branch: _Branch) -> tuple[str, ...]:
        if branch.done:
            return ()
        if branch.held is None:
            return tuple(f"take {o}" for o in self._game.objects)
        return tuple(f"put {branch.held} in {r}" for r in self._game.receptacles)

    def _record(self, branch: _Branch, text: str, admissible: bool) -> EnvStep:
        truncated = not branch.done and branch.steps >= self._max_steps
        done = branch.done or truncated
        raw = f"{self._task_info.task_id}|{branch.held}|{branch.done}|{branch.won}"
        return EnvStep(
            observation=text,
            score=1.0 if branch.won else 0.0,
            done=done,
            won=branch.won,
            admissible=admissible,
            admissible_actions=() if done else self._actions(branch),
            state_key=hashlib.sha1(raw.encode()).hexdigest()[:16],
            info={"env_steps": branch.steps, "truncated": truncated},
        )

    def _transition(self, branch: _Branch, action: str) -> tuple[_Branch, str, bool]:
        steps = branch.steps + 1
        if action not in self._actions(branch):
            seen = f"Nothing happens. Your task is to: {self._game.description}"
            return _Branch(branch.held, steps), seen, False
        if branch.held is None:
            obj = action.removeprefix("take ")
            seen = f"You pick up the {obj}. Your task is to: {self._game.description}"
            return _Branch(obj, steps), seen, True
        place = action.rsplit(" in ", 1)[1]
        won = branch.held == self._game.goal and place == self._game.target
        return (
            _Branch(branch.held, steps, True, won),
            f"You put the {branch.held} in the {place}.",
            True,
        )

    async def reset(self) -> list[EnvStep]:
        """Start all branches: the table's objects and the receptacles are in view."""
        self._check_open()
        game = self._game
        intro = (
            f"On the table you see: {', '.join(game.objects)}. "
            f"Nearby: {', '.join(game.receptacles)}. Your task is to: {game.description}"
        )
        self._branches = [_Branch()] * self._size
        self._steps = [self._record(_Branch(), intro, True)] * self._size
        return list(self._steps)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Advance the branches whose action is not None."""
        self._check_open()
        if not self._steps:
            raise RuntimeError("FetchEnvGroup.step() called before reset()")
        if len(actions) != self._size:
            raise ValueError(f"expected {self._size} actions, got {len(actions)}")
        for i, action in enumerate(actions):
            if action is None or self._steps[i].finished:
                continue
            command = command_of(action).strip().lower()
            branch, text, ok = self._transition(self._branches[i], command)
            self._branches[i] = branch
            self._steps[i] = self._record(branch, text, ok)
        return list(self._steps)

    async def close(self) -> None:
        """Nothing to release; idempotent."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("FetchEnvGroup is closed")


class FetchCommands(PlainCommands):
    """The plain-command protocol with the actions listed *before* the observation, so every
    message ends with the goal sentence, next to the reply that must act on it."""

    system_prompt = "Reply with the one command, copied from the actions, that does the task."

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """Step counter, actions, then the observation (which ends with the goal)."""
        lines = [f"Step 0 of {max_env_steps}.", *self._listed(first_step)]
        lines.append(f"Observation:\n{first_step.observation.strip()}")
        return [
            Message(role="system", content=self.system_prompt),
            Message(role="user", content="\n".join(lines)),
        ]

    def tool_message(self, result: ToolResult) -> Message:
        """Status, step counter, actions (unless finished), then the observation."""
        message = super().tool_message(result)
        lines = message.content.split("\n")[:2]
        if result.status not in (TurnStatus.WON, TurnStatus.ENDED):
            lines.extend(self._listed(result.step))
        if result.status is not TurnStatus.INVALID_FORMAT:
            lines.append(f"Observation:\n{result.step.observation.strip()}")
        return replace(message, content="\n".join(lines))

    @staticmethod
    def _listed(step: EnvStep) -> list[str]:
        actions = list(step.admissible_actions)
        return [ACTIONS_HEADING, *actions] if actions else []


def fetch_group_factory(
    objects: int = 3, receptacles: int = 3, max_steps: int = 3
) -> EnvGroupFactory:
    """An `EnvGroupFactory` for fetch games of this size."""

    def factory(task: TaskInfo, group_size: int) -> FetchEnvGroup:
        return FetchEnvGroup(
            task, group_size, objects=objects, receptacles=receptacles, max_steps=max_steps
        )

    return factory
