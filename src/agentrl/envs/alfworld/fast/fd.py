"""fast-downward plumbing: reading a game file, PDDL-to-SAS translation, library copies."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from agentrl._optional import require

__all__ = ["GameLoadError", "LibPool", "read_game", "translate"]

_PURPOSE = "the ALFWorld engine"
# fast-downward's translator keeps its options in module globals and swaps sys.stdout while it
# runs: one translation at a time in this process, whichever engine asks for it.
_TRANSLATE_LOCK = threading.Lock()


class GameLoadError(ValueError):
    """A game file is missing, unreadable or lacks a field."""


def translate(domain: str, problem: str, *, optimize: bool) -> tuple[Any, str]:
    """Translate PDDL to SAS with fast-downward, as TextWorld's `PddlState` does."""
    fd = require("fast_downward", "alfworld", _PURPOSE)
    with _TRANSLATE_LOCK:
        argv = sys.argv  # pddl2sas replaces it (its option parser reads it)
        try:
            task, sas = fd.pddl2sas(domain, problem, verbose=False, optimize=optimize)
        finally:
            sys.argv = argv
    return task, str(sas)


class LibPool:
    """Loaded copies of fast-downward's library, reused across games (each holds one task).

    A copy is never unloaded: unloading a copy that has run a task can crash the process at
    the next load (TextWorld never unloads its copies either). A released copy frees its task
    and waits for the next game, so a process holds as many copies as it ever had games loaded
    at once. `LibPool.shared()` is the process's pool, used by every engine by default.
    """

    _shared: LibPool | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._fd = require("fast_downward", "alfworld", _PURPOSE)
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self.loaded = 0
        """Copies this pool has loaded."""

    @classmethod
    def shared(cls) -> LibPool:
        """The pool of this process."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def acquire(self) -> Any:
        """An idle library, or a freshly loaded copy."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.loaded += 1
        return self._fd.load_lib()

    def release(self, lib: Any) -> None:
        """Give a library back; its task is freed and the copy waits for the next game."""
        lib.cleanup()
        with self._lock:
            self._idle.append(lib)

    @property
    def idle(self) -> int:
        """Copies waiting for a game."""
        return len(self._idle)


def read_game(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON of a `.tw-pddl` file, with a clear error for a bad file."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise GameLoadError(f"game file not found: {file}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GameLoadError(f"cannot read game file {file}: {exc}") from exc
    if not isinstance(data, dict):
        raise GameLoadError(f"game file {file} does not hold a JSON object")
    for key in ("pddl_domain", "pddl_problem", "grammar"):
        if not isinstance(data.get(key), str):
            raise GameLoadError(f"game file {file} lacks the text field '{key}'")
    return data
