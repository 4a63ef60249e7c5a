"""What an ALFWorld engine branch reports, and the protocol both engines implement."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from agentrl.envs.alfworld.engine import IGNORED_PREDICATES, state_key

__all__ = [
    "IGNORED_PREDICATES",
    "Branch",
    "BranchStep",
    "fact_text",
    "facts_state_key",
    "keep_for_key",
    "key_of_sorted",
]

facts_state_key = state_key
"""The EnvGroup's state key (`agentrl.envs.alfworld.engine.state_key`) of fact texts."""


@dataclass(frozen=True)
class BranchStep:
    """One observation of one branch, in the terms of TextWorld's `PddlEnv` + ALFWorld wrappers."""

    observation: str
    """The feedback text (the intro after a reset, "Nothing happens." after an invalid command)."""
    score: float
    """1.0 once the game is won, else 0.0 (0.0 after a reset)."""
    done: bool
    """The game ended (won; after a reset: False)."""
    won: bool
    """The goal holds in the current state."""
    admissible_commands: tuple[str, ...]
    """Commands executable from the current state, sorted, without duplicates (incl. `help`
    only if the game makes it admissible)."""
    gamefile: str | None
    """The game file, as ALFWorld's `AlfredInfos` reports it in `extra.gamefile`: after a
    reset only (None after a step)."""
    state_key: str = ""
    """`agentrl.envs.alfworld.engine.state_key` of the state's facts (bookkeeping facts such as
    `checked` left out)."""
    executed: bool = True
    """Whether the command matched an admissible command and changed the state (True after a
    reset)."""


class Branch(Protocol):
    """One independent playthrough of one game (an engine's unit of state)."""

    def reset(self) -> BranchStep:
        """Return to the initial state."""
        ...

    def step(self, command: str) -> BranchStep:
        """Execute one text command."""
        ...

    def state_key(self) -> str:
        """A stable identifier of the current game state (equal states, equal keys)."""
        ...

    def close(self) -> None:
        """Release what the branch holds; harmless to call twice."""
        ...


def fact_text(prop: Any) -> str:
    """A TextWorld proposition as `pred(arg1, arg2)` (names only)."""
    return f"{prop.name}({', '.join(var.name for var in prop.arguments)})"


def keep_for_key(text: str) -> bool:
    """Whether a fact text takes part in the state key."""
    return text.split("(", 1)[0] not in IGNORED_PREDICATES and not text.startswith("new-axiom@")


def key_of_sorted(texts: Iterable[str]) -> str:
    """`state_key` of fact texts already filtered (`keep_for_key`), sorted and unique."""
    return hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]
