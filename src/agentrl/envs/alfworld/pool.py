"""A pool of persistent ALFWorld worker processes that serve any game across updates.

Starting a worker per group costs a process start, the imports and a first game load (about
1.3 s of CPU, seconds of wall) on every group of every update. An `EnvWorkerPool` keeps
`size` worker processes alive instead (default: one per CPU). A group borrows a slot on the
least-loaded worker (preferring one that holds its game already), the worker loads the game's
K engines on demand, or takes them from its cache of released engines, and the group returns
them on `close()`. Several groups may share one worker; their requests are served in turn.

Each worker keeps released engines of at most `max_cached_games` games, least recently used
out first, and evicts further while its resident memory exceeds `max_worker_memory_mb`.
Engines that raised are never cached. Every group resets its engines before playing, so a
cached engine starts exactly like a fresh one.

Failures are handled as for a worker per group (`workers.py`): a step past its timeout or a
dead worker kills that process and ends the live branches of every group on it with
`EnvStep.error` (`env_error`); the next borrow starts a replacement. `close()` stops every
worker; after it no process is left. The pool is an explicit object: whoever builds it (the
recipe, a trainer's caller, an evaluation) closes it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import OrderedDict
from collections.abc import Sequence
from multiprocessing.connection import Connection

from agentrl.envs.alfworld.engine import AlfworldEngine, engine_target
from agentrl.envs.alfworld.workers import BranchReport, _play_calls
from agentrl.executors.child import ChildProcess, WorkerFailure, become_worker, describe_error
from agentrl.executors.process import default_workers

__all__ = ["EnvWorkerPool", "WorkerLease", "default_pool_size", "serve_pool"]

GameKey = tuple[str, str]
"""(engine loader target, game file)."""


def default_pool_size() -> int:
    """One worker per CPU this process may run on (as the process executor's default)."""
    return default_workers()


def _resident_mb() -> float | None:
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _close_all(engines: Sequence[AlfworldEngine | None]) -> None:
    for engine in engines:
        if engine is not None:
            with contextlib.suppress(Exception):
                engine.close()


def _evict(idle: OrderedDict[GameKey, list[AlfworldEngine]], games: int, memory: float) -> None:
    while len(idle) > games:
        _close_all(idle.popitem(last=False)[1])
    resident = _resident_mb()
    while idle and resident is not None and resident > memory:
        _close_all(idle.popitem(last=False)[1])
        import gc

        gc.collect()
        resident = _resident_mb()


def serve_pool(fd: int, max_games: str, max_memory_mb: str) -> None:
    """Pool worker body: open / run / release requests for any number of slots on `fd`."""
    become_worker()
    conn = Connection(fd)
    from agentrl.envs.alfworld.engine import open_engines

    idle: OrderedDict[GameKey, list[AlfworldEngine]] = OrderedDict()
    slots: dict[int, tuple[GameKey, list[AlfworldEngine | None]]] = {}
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break
        kind = request[0]
        if kind == "close":
            break
        if kind == "open":
            _, slot, target, game_file, count = request
            key = (target, game_file)
            cached = idle.pop(key, [])
            engines: list[AlfworldEngine | None] = list(cached[:count])
            if cached[count:]:
                idle[key] = cached[count:]
            missing = count - len(engines)
            try:
                for loaded in open_engines(target, game_file, missing) if missing else ():
                    engines.append(loaded)
                    conn.send(("loaded", len(engines) - 1))
            except Exception as exc:
                _close_all(engines)
                conn.send(("load_error", len(engines), describe_error(exc)))
                continue
            slots[slot] = (key, engines)
            conn.send(("ready",))
        elif kind == "run":
            _, slot, calls = request
            entry = slots.get(slot)
            _play_calls(conn, entry[1] if entry is not None else None, calls)
            conn.send(("done",))
        elif kind == "release":
            _, slot, keep = request
            released = slots.pop(slot, None)
            if released is None:
                continue
            key, held = released
            if keep and all(e is not None for e in held):
                idle.setdefault(key, []).extend(e for e in held if e is not None)
                idle.move_to_end(key)
            else:
                _close_all(held)
            _evict(idle, int(max_games), float(max_memory_mb))
    for _, held in slots.values():
        _close_all(held)
    for engines_of_game in idle.values():
        _close_all(engines_of_game)
    conn.close()


class _PoolWorker(ChildProcess):
    """Client of one pool worker process."""

    def __init__(self, max_games: int, max_memory_mb: float) -> None:
        super().__init__()
        self.active = 0
        """Slots borrowed from this worker now."""
        self.games: set[GameKey] = set()
        """Games this worker has loaded (cached or in use), for affinity."""
        self._spawn(f"{__name__}:serve_pool", str(max_games), str(max_memory_mb))

    async def open(self, slot: int, key: GameKey, count: int, load_timeout: float) -> None:
        """Load (or take from the cache) `count` engines of the game into `slot`."""
        async with self._lock:
            self._send(("open", slot, key[0], key[1], count), 0)
            loaded = 0
            while True:
                message = await self._receive(load_timeout, loaded, "loading")
                if message[0] == "loaded":
                    loaded = message[1] + 1
                elif message[0] == "ready":
                    self.games.add(key)
                    return
                else:  # load_error: the worker itself is fine
                    raise WorkerFailure(
                        f"branch {message[1]}: could not load {key[1]}: {message[2]}",
                        message[1],
                    )

    async def run(
        self, slot: int, calls: Sequence[tuple[int, str | None]], timeout: float
    ) -> list[BranchReport]:
        """Reset or step the slot's branches (see `GroupWorker.run`)."""
        async with self._lock:
            self._send(("run", slot, list(calls)), calls[0][0] if calls else None)
            reports: list[BranchReport] = []
            for branch, command in calls:
                doing = "resetting" if command is None else f"running {command!r}"
                message = await self._receive(timeout, branch, doing)
                if message[0] != "report":
                    self.kill()
                    raise WorkerFailure(f"unexpected message from the worker: {message!r}", branch)
                reports.append(message[1])
            done = await self._receive(timeout, None, "finishing")
            if done[0] != "done":
                self.kill()
                raise WorkerFailure(f"unexpected message from the worker: {done!r}", None)
            return reports

    def release(self, slot: int, keep: bool) -> None:
        """Give the slot's engines back (a whole message; no reply, so no lock needed)."""
        self.active -= 1
        if self.alive:
            with contextlib.suppress(WorkerFailure):
                self._send(("release", slot, keep), None)


class WorkerLease:
    """A group's engines in a pool worker; used like a `GroupWorker` (run, alive, kill, close)."""

    def __init__(self, worker: _PoolWorker, slot: int) -> None:
        self._worker: _PoolWorker | None = worker
        self._held = worker
        self.slot = slot

    @property
    def pid(self) -> int | None:
        """The worker process's id."""
        return self._held.pid

    @property
    def alive(self) -> bool:
        """True while the lease holds engines in a running worker."""
        return self._worker is not None and self._worker.alive

    async def run(
        self, calls: Sequence[tuple[int, str | None]], timeout: float
    ) -> list[BranchReport]:
        """Reset (command None) or step each `(branch, command)`; see `GroupWorker.run`."""
        if self._worker is None:
            raise WorkerFailure("the lease was returned", calls[0][0] if calls else None)
        return await self._worker.run(self.slot, calls, timeout)

    def _give_back(self, keep: bool) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.release(self.slot, keep)

    def kill(self) -> None:
        """Return the engines without caching them (they failed or disagree)."""
        self._give_back(False)

    async def close(self) -> None:
        """Return the engines to the worker's cache."""
        self._give_back(True)


class EnvWorkerPool:
    """Persistent worker processes shared by the ALFWorld groups of every update.

    `size` workers (default `default_pool_size()`), each caching released engines of at most
    `max_cached_games` games within `max_worker_memory_mb` of resident memory.
    """

    def __init__(
        self,
        size: int | None = None,
        *,
        max_cached_games: int = 32,
        max_worker_memory_mb: float = 2048.0,
    ) -> None:
        chosen = default_pool_size() if size is None else size
        if chosen < 1:
            raise ValueError(f"pool size must be >= 1, got {chosen}")
        if max_cached_games < 0 or max_worker_memory_mb <= 0:
            raise ValueError("max_cached_games must be >= 0 and max_worker_memory_mb > 0")
        self.size = chosen
        self.max_cached_games = max_cached_games
        self.max_worker_memory_mb = max_worker_memory_mb
        self._workers: list[_PoolWorker | None] = [None] * chosen
        self._slots = itertools.count()
        self._closed = False
        self.started = 0
        """Worker processes started so far (replacements included)."""

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.pid for w in self._workers if w is not None and w.pid is not None and w.alive]

    def _choose(self, key: GameKey) -> _PoolWorker:
        for i, worker in enumerate(self._workers):
            if worker is None or not worker.alive:
                if worker is not None:
                    worker.kill()
                self._workers[i] = None
        live = [w for w in self._workers if w is not None]
        least = min((w.active for w in live), default=0)
        holding = [w for w in live if key in w.games and w.active <= least + 1]
        if holding:
            return min(holding, key=lambda w: w.active)
        if len(live) < self.size and (not live or least > 0):
            worker = _PoolWorker(self.max_cached_games, self.max_worker_memory_mb)
            self.started += 1
            self._workers[self._workers.index(None)] = worker
            return worker
        return min(live, key=lambda w: w.active)

    async def borrow(
        self, engine: str, game_file: str, count: int, load_timeout: float
    ) -> WorkerLease:
        """`count` engines of `game_file` in a pool worker, reset by the caller before use.

        Raises `WorkerFailure` when the game cannot be loaded or the worker fails.
        """
        if self._closed:
            raise WorkerFailure("the environment worker pool is closed", None)
        key = (engine if ":" in engine else engine_target(engine), game_file)
        worker = self._choose(key)
        slot = next(self._slots)
        worker.active += 1
        try:
            await worker.open(slot, key, count, load_timeout)
        except BaseException:
            worker.active -= 1
            raise
        return WorkerLease(worker, slot)

    async def close(self) -> None:
        """Stop every worker (idempotent); no process is left afterwards."""
        self._closed = True
        workers, self._workers = self._workers, [None] * self.size
        for worker in workers:
            if worker is not None:
                await worker.close()

    def __repr__(self) -> str:
        return f"EnvWorkerPool(size={self.size}, running={len(self.pids)})"
