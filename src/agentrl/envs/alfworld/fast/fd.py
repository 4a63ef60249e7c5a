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

    Copies are never unloaded: `dlclose` of one copy followed by `dlopen` of another crashed
    the process (segmentation fault) once a few dozen games had been loaded and freed, so a
    released copy stays loaded and idle for the next game. The number of copies is thus the
    peak number of games alive at once (a worker process holds one). `max_idle` is kept for
    compatibility and ignored.
    """

    def __init__(self, max_idle: int = 4) -> None:
        self._fd = require("fast_downward", "alfworld", _PURPOSE)
        self._idle: list[Any] = []
        self._max_idle = max_idle
        self._lock = threading.Lock()

    def acquire(self) -> Any:
        """An idle library, or a freshly loaded copy."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._fd.load_lib()

    def release(self, lib: Any) -> None:
        """Give a library back (its task is freed; the copy stays loaded for reuse)."""
        lib.cleanup()
        with self._lock:
            self._idle.append(lib)

    def close(self) -> None:
        """Forget idle copies (they stay mapped: unloading them is what crashed)."""
        with self._lock:
            self._idle = []


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
