"""A tiny scripted engine for the worker's failure paths (hang, crash, exception).

Registered at test time under a `module:function` target, so the worker process imports it
by the same name the test process did (the worker gets the parent's `sys.path`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from agentrl.envs.alfworld.engine import EngineStep, state_key

COMMANDS = ("go north", "hang", "boom", "die", "slow")


class FaultEngine:
    """Counts steps; `hang` sleeps for an hour, `boom` raises, `die` kills the process, `slow`
    takes 0.6 s and says so."""

    def __init__(self) -> None:
        self.steps = 0

    def _step(self, text: str) -> EngineStep:
        won = self.steps >= 3
        return EngineStep(
            observation=text,
            won=won,
            done=won,
            admissible_commands=COMMANDS,
            state_key=state_key([f"steps({self.steps})"]),
        )

    def reset(self) -> EngineStep:
        """Back to step 0."""
        self.steps = 0
        return self._step("You are in a test room.")

    def step(self, command: str) -> EngineStep:
        """Run one scripted command."""
        if command == "hang":
            time.sleep(3600)
        if command == "boom":
            raise RuntimeError("the engine exploded")
        if command == "die":
            os._exit(7)
        if command == "slow":
            time.sleep(0.6)
            return self._step("You walk slowly.")
        if command in COMMANDS:
            self.steps += 1
            return self._step(f"You walk. Steps: {self.steps}.")
        return self._step("Nothing happens.")

    def close(self) -> None:
        """Nothing to release."""


def load(game_file: str, count: int) -> Iterator[FaultEngine]:
    """Engine loader: `count` fresh engines (the game file is not read)."""
    for _ in range(count):
        yield FaultEngine()
