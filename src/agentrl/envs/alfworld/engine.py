"""The one place where an ALFWorld game is loaded and stepped: the engine interface.

An engine plays one branch of one game synchronously (it runs inside a worker process, see
`workers.py`). `open_engines(name, game_file, count)` yields `count` independent engines of
the game; the EnvGroup never touches TextWorld directly. `TextWorldEngine` is the stock
engine: TextWorld's `PddlEnv` wrapped the way ALFWorld's text environment is
(`AlfredDemangler(shuffle=False)`, `AlfredInfos`). A second engine plugs in by adding its
loader to `ENGINES` (same observations, commands, scores and state keys).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from agentrl._optional import require
from agentrl.envs.alfworld.compat import apply_textworld_compat

__all__ = [
    "ENGINES",
    "IGNORED_PREDICATES",
    "AlfworldEngine",
    "EngineStep",
    "TextWorldEngine",
    "engine_loader",
    "engine_target",
    "open_engines",
    "state_key",
]

IGNORED_PREDICATES = frozenset({"checked", "examined"})
"""Bookkeeping predicates (set by look / examine / open) that no precondition, goal or text
rule reads; `state_key` leaves them out so that looking around does not create new states."""


def state_key(facts: Iterable[str]) -> str:
    """A stable hash of a world state given as facts `pred(arg1, arg2)` (order-free).

    Facts whose predicate is in `IGNORED_PREDICATES` or starts with `new-axiom@` are left out.
    Equal fact sets give equal keys in every process and on every branch.
    """
    kept = sorted(
        {
            fact
            for fact in facts
            if fact.split("(", 1)[0] not in IGNORED_PREDICATES and not fact.startswith("new-axiom@")
        }
    )
    return hashlib.sha1("\n".join(kept).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class EngineStep:
    """What an engine reports after a reset or a step of one branch."""

    observation: str
    won: bool
    done: bool
    admissible_commands: tuple[str, ...]
    """Commands executable from the new state, as the game lists them (`help` included)."""
    state_key: str
    gamefile: str | None = None


class AlfworldEngine(Protocol):
    """One branch of one ALFWorld game, played synchronously."""

    def reset(self) -> EngineStep:
        """Start (or restart) the game."""
        ...

    def step(self, command: str) -> EngineStep:
        """Execute `command` (an unknown command leaves the state as it is)."""
        ...

    def close(self) -> None:
        """Release the game."""
        ...


def _fact_text(prop: Any) -> str:
    return f"{prop.name}({', '.join(var.name for var in prop.arguments)})"


class TextWorldEngine:
    """Stock engine: TextWorld `PddlEnv` + `AlfredDemangler(shuffle=False)` + `AlfredInfos`."""

    def __init__(self, game_file: str) -> None:
        textworld = require("textworld", "alfworld", "the ALFWorld environment")
        require("fast_downward", "alfworld", "the ALFWorld environment")
        tw_env = require(
            "alfworld.agents.environment.alfred_tw_env", "alfworld", "the ALFWorld environment"
        )
        apply_textworld_compat()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        wrappers = [tw_env.AlfredDemangler(shuffle=False), tw_env.AlfredInfos]
        self._env = textworld.start(game_file, infos, wrappers=wrappers)
        self._game_file = game_file

    def _record(self, state: Any) -> EngineStep:
        won = bool(state["won"])
        return EngineStep(
            observation=str(state["feedback"]),
            won=won,
            done=won or bool(state.get("lost", False)),
            admissible_commands=tuple(state["admissible_commands"]),
            state_key=state_key(_fact_text(p) for p in state["_facts"]),
            gamefile=state.get("extra.gamefile", self._game_file),
        )

    def reset(self) -> EngineStep:
        """Start the game."""
        return self._record(self._env.reset())

    def step(self, command: str) -> EngineStep:
        """Execute one command."""
        state, _score, _done = self._env.step(command)
        return self._record(state)

    def close(self) -> None:
        """Close the TextWorld environment."""
        self._env.close()


def _load_textworld(game_file: str, count: int) -> Iterator[AlfworldEngine]:
    for _ in range(count):
        yield TextWorldEngine(game_file)


EngineLoader = Callable[[str, int], Iterator[AlfworldEngine]]

ENGINES: dict[str, str] = {
    "textworld": "agentrl.envs.alfworld.engine:_load_textworld",
}
"""Engine name -> `module:function` of a loader `(game_file, count) -> Iterator[engine]`.
Loaders yield engines one by one so that callers can bound the time of each load."""


def engine_target(name: str) -> str:
    """The `module:function` loader registered for engine `name` (clear error if unknown)."""
    if name not in ENGINES:
        raise ValueError(f"unknown ALFWorld engine {name!r}; available: {sorted(ENGINES)}")
    return ENGINES[name]


def engine_loader(name_or_target: str) -> EngineLoader:
    """The loader of an engine name, or of a `module:function` target."""
    target = name_or_target if ":" in name_or_target else engine_target(name_or_target)
    module_name, _, attr = target.partition(":")
    loader: EngineLoader = getattr(importlib.import_module(module_name), attr)
    return loader


def open_engines(name_or_target: str, game_file: str, count: int) -> Iterator[AlfworldEngine]:
    """Yield `count` independent engines of `game_file` (each loaded when it is yielded)."""
    return engine_loader(name_or_target)(game_file, count)
