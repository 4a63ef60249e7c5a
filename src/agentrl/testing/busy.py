"""A synthetic CPU-bound environment, for executor tests and the scale-out benchmark.

Each step of a `BusyGroup` branch burns `burn_ms` of CPU (a busy loop, not a sleep: it holds
a core the way a code sandbox or a simulator does) and answers `work` with progress; `steps`
works in a row win. `BusySource` is its picklable `GroupSource`, with two fault hooks that
act inside the worker playing the group: `crash_task` kills that process (`os._exit`) on the
task's first step, `hang_task` sleeps past any timeout there. `busy_protocol()` is its
one-command tool protocol and `busy_reply` the reply of a perfect player.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agentrl.core.env import EnvGroup, EnvGroupFactory, command_of
from agentrl.core.types import EnvAction, EnvStep, TaskInfo
from agentrl.tools import CommandTool

__all__ = ["BusyGroup", "BusySource", "burn", "busy_protocol", "busy_reply", "busy_tasks"]

ACTIONS = ("work", "rest")


def burn(seconds: float) -> None:
    """Keep one core busy for `seconds` (a busy loop)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def busy_tasks(count: int, split: str = "train") -> list[TaskInfo]:
    """`count` tasks `busy-0`, `busy-1`, ... (they differ only by name)."""
    return [TaskInfo(f"busy-{i}", task_type="busy", split=split) for i in range(count)]


def busy_protocol() -> CommandTool:
    """The `busy_step` command protocol (actions listed)."""
    return CommandTool(
        name="busy_step",
        description="Do one unit of work.",
        system_prompt="Call busy_step with `work` until the task is done.",
    )


def busy_reply(prompt_text: str) -> str:
    """A perfect player's reply whatever the prompt: the `work` call."""
    del prompt_text
    return busy_protocol().call_text("work")


@dataclass(frozen=True)
class BusySource:
    """The `GroupSource` of `BusyGroup`s (see the module docstring for the fault hooks)."""

    burn_ms: float = 20.0
    steps: int = 4
    crash_task: str | None = None
    hang_task: str | None = None

    def __call__(self) -> EnvGroupFactory:
        """The factory, built where the groups run (`steps` < 1 raises `ValueError` there)."""
        if self.steps < 1:
            raise ValueError(f"BusySource: steps must be >= 1, got {self.steps}")
        return self.group

    def group(self, task: TaskInfo, group_size: int) -> EnvGroup:
        """A group of `group_size` branches of `task`."""
        return BusyGroup(self, task, group_size)


class BusyGroup:
    """K branches that each need `steps` works in a row; every step burns CPU."""

    def __init__(self, source: BusySource, task: TaskInfo, size: int) -> None:
        self.source = source
        self._task = task
        self._size = size
        self._done = [0] * size
        self._steps: list[EnvStep] = []

    @property
    def task(self) -> TaskInfo:
        """The task these branches play."""
        return self._task

    @property
    def size(self) -> int:
        """Number of branches K."""
        return self._size

    def _step(self, branch: int, text: str, admissible: bool) -> EnvStep:
        won = self._done[branch] >= self.source.steps
        return EnvStep(
            observation=text,
            won=won,
            done=won,
            admissible=admissible,
            admissible_actions=() if won else ACTIONS,
            state_key=f"{self._task.task_id}:{self._done[branch]}",
            info={"pid": os.getpid()},
        )

    async def reset(self) -> list[EnvStep]:
        """Every branch at 0 works."""
        self._done = [0] * self._size
        first = f"{self._task.task_id}: work {self.source.steps} times."
        self._steps = [self._step(i, first, True) for i in range(self._size)]
        return list(self._steps)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Burn `burn_ms` per acting branch; `work` counts, `rest` does not, others are not
        admissible."""
        for branch, action in enumerate(actions):
            if action is None or self._steps[branch].finished:
                continue
            if self._task.task_id == self.source.crash_task:
                os._exit(3)
            if self._task.task_id == self.source.hang_task:
                time.sleep(3600)
            burn(self.source.burn_ms / 1000)
            command = command_of(action)
            if command == "work":
                self._done[branch] += 1
            text = f"done {self._done[branch]} of {self.source.steps}"
            self._steps[branch] = self._step(branch, text, command in ACTIONS)
        return list(self._steps)

    async def close(self) -> None:
        """Nothing to release."""
