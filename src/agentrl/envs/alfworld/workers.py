"""Worker processes that host the engines of one EnvGroup, and their async client.

One process per group holds its K engines and answers over a socket pair, so that blocking
TextWorld work never runs on the event loop and a hung or crashed game can be killed
without touching the rest of the batch. The worker reports after every branch it loads or
steps; the client waits for each report with a timeout and, when one does not come (a hang)
or the connection breaks (a dead worker), kills the process and raises `WorkerFailure`
naming the branch that was in progress.

Workers are plain `python -c` subprocesses (not `multiprocessing` children), so they never
re-import the user's main script: scripts without an `if __name__ == "__main__":` guard and
notebooks work alike. TextWorld engines apply the compatibility patch (`compat.py`) when
they are created, i.e. inside the worker. On Linux a worker dies with its parent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from agentrl.envs.alfworld.engine import EngineStep, engine_target
from agentrl.executors.child import ChildProcess, WorkerFailure, become_worker, describe_error

__all__ = [
    "BranchReport",
    "CallWorker",
    "GroupWorker",
    "WorkerFailure",
    "serve",
    "serve_calls",
]


@dataclass(frozen=True)
class BranchReport:
    """One branch's answer: a step, or the error its engine raised."""

    branch: int
    step: EngineStep | None
    error: str | None = None


def serve(fd: int, engine: str, game_file: str, count: str) -> None:
    """Group worker body: load `count` engines, then serve run/close requests on `fd`.

    `engine` is an engine name or its loader's `module:function` target.
    """
    become_worker()
    conn = Connection(fd)
    from agentrl.envs.alfworld.engine import AlfworldEngine, open_engines

    engines: list[AlfworldEngine | None] = []
    try:  # TextWorld engines apply the compatibility patch themselves, here in the worker
        for branch, loaded in enumerate(open_engines(engine, game_file, int(count))):
            engines.append(loaded)
            conn.send(("loaded", branch))
    except Exception as exc:  # a game that cannot load: report it, then stop
        conn.send(("load_error", len(engines), describe_error(exc)))
        conn.close()
        return
    conn.send(("ready",))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break  # the parent went away
        kind = request[0]
        if kind == "close":
            break
        _play_calls(conn, engines, request[1])
        conn.send(("done",))
    for item in engines:
        if item is not None:
            with contextlib.suppress(Exception):
                item.close()
    conn.close()


def serve_calls(fd: int) -> None:
    """Call worker body: run `module:function(*args)` requests on `fd`, one at a time."""
    import importlib

    become_worker()
    conn = Connection(fd)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break
        if request[0] == "close":
            break
        _, target, args = request
        try:
            module, _, attr = target.partition(":")
            result = getattr(importlib.import_module(module), attr)(*args)
        except Exception as exc:
            conn.send(("error", describe_error(exc)))
        else:
            conn.send(("ok", result))
    conn.close()


def _play_calls(
    conn: Connection,
    engines: list[Any] | None,
    calls: Sequence[tuple[int, str | None]],
) -> None:
    """Reset (command None) or step each branch's engine and report each result in order; an
    engine that raised is dropped (its later calls report "engine failed earlier")."""
    for branch, command in calls:
        current = engines[branch] if engines is not None else None
        if current is None:
            conn.send(("report", BranchReport(branch, None, "engine failed earlier")))
            continue
        try:
            step = current.reset() if command is None else current.step(command)
        except Exception as exc:
            assert engines is not None
            engines[branch] = None
            conn.send(("report", BranchReport(branch, None, describe_error(exc))))
        else:
            conn.send(("report", BranchReport(branch, step)))


class GroupWorker(ChildProcess):
    """Async client of one worker process hosting `count` engines of one game."""

    def __init__(self, engine: str, game_file: str, count: int) -> None:
        super().__init__()
        self.engine = engine
        self.game_file = game_file
        self.count = count

    async def start(self, load_timeout: float) -> None:
        """Start the process and wait until every engine is loaded (`load_timeout` each)."""
        # pass the loader target, so engines registered at run time work in the child too
        target = self.engine if ":" in self.engine else engine_target(self.engine)
        self._spawn(f"{__name__}:serve", target, self.game_file, str(self.count))
        loaded = 0
        while True:
            message = await self._receive(load_timeout, loaded, "loading")
            if message[0] == "loaded":
                loaded = message[1] + 1
            elif message[0] == "ready":
                return
            else:  # load_error
                self.kill()
                raise WorkerFailure(
                    f"branch {message[1]}: could not load {self.game_file}: {message[2]}",
                    message[1],
                )

    async def run(
        self, calls: Sequence[tuple[int, str | None]], timeout: float
    ) -> list[BranchReport]:
        """Reset (command None) or step each `(branch, command)` in order; `timeout` each.

        Raises `WorkerFailure` (the worker is then dead) naming the branch in progress.
        """
        async with self._lock:
            self._send(("run", list(calls)), calls[0][0] if calls else None)
            reports: list[BranchReport] = []
            for branch, command in calls:
                doing = "resetting" if command is None else f"running {command!r}"
                message = await self._receive(timeout, branch, doing)
                reports.append(message[1])
            done = await self._receive(timeout, None, "finishing")
            if done[0] != "done":
                self.kill()
                raise WorkerFailure(f"unexpected message from the worker: {done!r}", None)
            return reports


class CallWorker(ChildProcess):
    """A reusable child process that runs `module:function(*args)` with a time bound.

    After a timeout or a crash the process is killed; the next call starts a fresh one.
    """

    async def call(self, target: str, args: Sequence[Any], timeout: float) -> Any:
        """Run `target` ("module:function") with `args` in the child; raise on failure.

        Raises `WorkerFailure` on a timeout or a dead child, `RuntimeError` with the child's
        error text when the function raised.
        """
        async with self._lock:
            if not self.alive:
                self.kill()
                self._spawn(f"{__name__}:serve_calls")
            self._send(("call", target, tuple(args)), None)
            status, value = await self._receive(timeout, None, f"running {target}")
            if status == "error":
                raise RuntimeError(f"{target} failed in the worker: {value}")
            return value
