"""What an ALFWorld engine branch reports, and the protocol both engines implement."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "IGNORED_PREDICATES",
    "EngineBranch",
    "EngineStep",
    "fact_text",
    "facts_state_key",
    "keep_for_key",
    "key_of_sorted",
]

IGNORED_PREDICATES = frozenset({"checked", "examined"})
"""Bookkeeping predicates (set by look / examine / open) that no precondition, goal or text rule
reads; state keys leave them out so that looking around does not create new states."""


@dataclass(frozen=True)
class EngineStep:
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
    """`facts_state_key` of the state's facts."""
    executed: bool = True
    """Whether the command matched an admissible command and changed the state (True after a
    reset)."""


class EngineBranch(Protocol):
    """One independent playthrough of one game (an engine's unit of state)."""

    def reset(self) -> EngineStep:
        """Return to the initial state."""
        ...

    def step(self, command: str) -> EngineStep:
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


def facts_state_key(texts: Iterable[str]) -> str:
    """Order-free hash of a state given as fact texts: 16 hex digits of the SHA-1 of the sorted,
    de-duplicated texts joined by newlines, bookkeeping facts (`IGNORED_PREDICATES`,
    `new-axiom@...`) left out. Equal fact sets give equal keys in every process."""
    return key_of_sorted(sorted({text for text in texts if keep_for_key(text)}))


def key_of_sorted(texts: Iterable[str]) -> str:
    """The state key of already filtered, sorted, unique fact texts."""
    return hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]
