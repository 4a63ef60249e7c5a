"""`FastAlfworldEngine`: loads games once and hands out cheap, independent branches."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from agentrl.envs.alfworld.fast.branch import FastBranch
from agentrl.envs.alfworld.fast.fd import LibPool
from agentrl.envs.alfworld.fast.game import FastGame
from agentrl.envs.alfworld.fast.grammar import GrammarCache

__all__ = ["FastAlfworldEngine"]


class FastAlfworldEngine:
    """Fast ALFWorld engine: byte-identical to TextWorld's `PddlEnv` with ALFWorld's wrappers.

    Games are cached (least recently used first out) by path, size and modification time;
    grammar parses are shared across games; fast-downward libraries are pooled (by default in
    the process-wide `LibPool.shared()`). Thread-safe.
    """

    def __init__(self, *, max_cached_games: int = 8, pool: LibPool | None = None) -> None:
        if max_cached_games < 0:
            raise ValueError("max_cached_games must be >= 0")
        self.grammar_cache = GrammarCache()
        self._pool = pool if pool is not None else LibPool.shared()
        self._games: OrderedDict[tuple[str, int, int], FastGame] = OrderedDict()
        self._max_games = max_cached_games
        self._lock = threading.Lock()
        self._loading: dict[tuple[str, int, int], threading.Lock] = {}

    def game(self, gamefile: str | os.PathLike[str]) -> FastGame:
        """The loaded game (from the cache when the file is unchanged)."""
        path = str(gamefile)
        try:
            stat = Path(path).stat()
        except OSError as exc:
            raise FileNotFoundError(f"ALFWorld game file not found: {path}") from exc
        # keyed by the path as given: a reset reports it back as `gamefile`, as TextWorld does
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._games.get(key)
            if cached is not None:
                self._games.move_to_end(key)
                return cached
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:  # one load per file even when several groups ask at once
            with self._lock:
                cached = self._games.get(key)
                if cached is not None:
                    return cached
            try:
                game = FastGame(path, self.grammar_cache, self._pool)
            finally:
                with self._lock:
                    self._loading.pop(key, None)
            with self._lock:
                if self._max_games > 0:
                    self._games[key] = game
                    while len(self._games) > self._max_games:
                        # Branches still playing an evicted game keep it (and its library)
                        # alive; the library returns to the pool when the game is collected.
                        self._games.popitem(last=False)
        return game

    def branches(self, gamefile: str | os.PathLike[str], count: int) -> list[FastBranch]:
        """`count` independent branches of one game, in its initial state."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        game = self.game(gamefile)
        return [FastBranch(game) for _ in range(count)]

    def branch(self, gamefile: str | os.PathLike[str]) -> FastBranch:
        """One branch of a game, in its initial state."""
        return self.branches(gamefile, 1)[0]

    def clear(self) -> None:
        """Drop every cached game (branches keep theirs; libraries go back to the pool)."""
        with self._lock:
            self._games.clear()

    def close(self) -> None:
        """Same as `clear`; the engine stays usable."""
        self.clear()
