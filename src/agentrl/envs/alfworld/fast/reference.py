"""The reference: stock TextWorld, built as ALFWorld's official text environment builds it.

`alfworld.agents.environment.AlfredTWEnv.init_env` registers the games with
`textworld.gym.register_games(files, EnvInfos(won=True, admissible_commands=True,
extras=["gamefile"]), wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])`; each gym
environment is `GenericEnvironment(infos)` wrapped by those wrappers and a final `Filter`
(`textworld.gym.envs.textworld_batch._make_env`). `TextWorldBranch` builds exactly that chain
for one game (with fresh wrapper instances: a shared instance would re-wrap) and reports it as
`BranchStep` records.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from agentrl._optional import require
from agentrl.envs.alfworld.compat import apply_textworld_compat
from agentrl.envs.alfworld.fast.records import BranchStep, fact_text, facts_state_key

__all__ = ["TextWorldBranch", "official_text_env"]

_PURPOSE = "the stock ALFWorld engine"


def official_text_env() -> Any:
    """An unloaded TextWorld environment wrapped like ALFWorld's official text environment.

    On CPython 3.13+ TextWorld's grammar evaluation needs `apply_textworld_compat` (same texts);
    on earlier versions it runs unpatched, exactly as ALFWorld runs it.
    """
    if sys.version_info >= (3, 13):
        apply_textworld_compat()
    textworld = require("textworld", "alfworld", _PURPOSE)
    wrappers = require("textworld.envs.wrappers", "alfworld", _PURPOSE)
    alfred = require("alfworld.agents.environment.alfred_tw_env", "alfworld", _PURPOSE)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env = wrappers.GenericEnvironment(infos)
    env = alfred.AlfredDemangler(shuffle=False)(env)
    env = alfred.AlfredInfos(env)
    return wrappers.Filter(env)


class TextWorldBranch:
    """One stock TextWorld environment of one game (the `engine="textworld"` reference)."""

    def __init__(self, gamefile: str | os.PathLike[str]) -> None:
        self.gamefile = str(gamefile)
        self._env: Any = official_text_env()
        self._env.load(self.gamefile)
        self._admissible: tuple[str, ...] = ()
        self.last_step_seconds = 0.0
        """Time the stock environment itself took for the last step (not the state key)."""
        self.last_reset_seconds = 0.0
        """Time the stock environment itself took for the last reset (not the state key)."""

    def reset(self) -> BranchStep:
        """Reset the stock environment (it re-translates the PDDL problem)."""
        started = time.perf_counter()
        observation, infos = self._env.reset()
        self.last_reset_seconds = time.perf_counter() - started
        self._admissible = tuple(infos["admissible_commands"])
        return BranchStep(
            observation=observation,
            score=0.0,
            done=False,
            won=bool(infos["won"]),
            admissible_commands=self._admissible,
            gamefile=infos["extra.gamefile"],
            state_key=self.state_key(),
        )

    def step(self, command: str) -> BranchStep:
        """One stock step."""
        executed = command.strip() in self._admissible
        started = time.perf_counter()
        observation, score, done, infos = self._env.step(command)
        self.last_step_seconds = time.perf_counter() - started
        self._admissible = tuple(infos["admissible_commands"])
        return BranchStep(
            observation=observation,
            score=float(score),
            done=bool(done),
            won=bool(infos["won"]),
            admissible_commands=self._admissible,
            gamefile=infos["extra.gamefile"],
            state_key=self.state_key(),
            executed=executed,
        )

    @property
    def pddl_env(self) -> Any:
        """The wrapped TextWorld `PddlEnv`."""
        return self._env.unwrapped

    def plan(self) -> list[str]:
        """The PDDL planner's commands from the current state (TextWorld's `replan`)."""
        env = self.pddl_env
        return list(env._pddl_state.replan(env._entity_infos))

    def state_key(self) -> str:
        """Key of the current state (see `facts_state_key`)."""
        return facts_state_key(fact_text(p) for p in self.pddl_env._pddl_state.facts)

    def close(self) -> None:
        """Drop the environment (TextWorld never unloads its fast-downward library)."""
        self._env = None
