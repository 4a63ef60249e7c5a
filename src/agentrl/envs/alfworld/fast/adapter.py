"""The fast engine behind the ALFWorld EnvGroup's engine interface (`engine="fast"`).

`load_fast(game_file, count)` is the loader registered in `agentrl.envs.alfworld.engine.ENGINES`:
it loads the game once and yields `count` branches of it, each an `AlfworldEngine` reporting
the same `EngineStep` records (observation, won, done, admissible commands, state key, game
file) as the stock `TextWorldEngine`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from agentrl.envs.alfworld.engine import AlfworldEngine, EngineStep
from agentrl.envs.alfworld.fast.branch import FastBranch
from agentrl.envs.alfworld.fast.engine import FastAlfworldEngine
from agentrl.envs.alfworld.fast.records import BranchStep

__all__ = ["FastEngine", "load_fast", "shared_engine"]


@functools.cache
def shared_engine() -> FastAlfworldEngine:
    """This process's fast engine (its game cache and library pool serve every group)."""
    return FastAlfworldEngine()


class FastEngine:
    """One branch of a game on the fast engine (implements `AlfworldEngine`)."""

    def __init__(self, branch: FastBranch) -> None:
        self._branch = branch
        self._game_file = branch.game.gamefile

    def _record(self, step: BranchStep) -> EngineStep:
        return EngineStep(
            observation=step.observation,
            won=step.won,
            done=step.done,
            admissible_commands=step.admissible_commands,
            state_key=step.state_key,
            gamefile=step.gamefile if step.gamefile is not None else self._game_file,
        )

    def reset(self) -> EngineStep:
        """Return to the game's initial state."""
        return self._record(self._branch.reset())

    def step(self, command: str) -> EngineStep:
        """Execute one command."""
        return self._record(self._branch.step(command))

    def close(self) -> None:
        """Release the branch (harmless twice)."""
        self._branch.close()


def load_fast(game_file: str, count: int) -> Iterator[AlfworldEngine]:
    """Load `game_file` once and yield `count` independent fast branches of it."""
    branches = shared_engine().branches(game_file, count)
    for branch in branches:
        yield FastEngine(branch)
