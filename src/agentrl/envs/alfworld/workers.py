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

import asyncio
import contextlib
import socket
import subprocess
import sys
import traceback
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from agentrl.envs.alfworld.engine import EngineStep, engine_target

__all__ = [
    "BranchReport",
    "CallWorker",
    "GroupWorker",
    "WorkerFailure",
    "serve",
    "serve_calls",
]


class WorkerFailure(RuntimeError):
    """The worker hung past its timeout or died; it has been killed."""

    def __init__(self, message: str, branch: int | None) -> None:
        super().__init__(message)
        self.branch = branch
        """The branch that was being loaded or stepped, when known."""


@dataclass(frozen=True)
class BranchReport:
    """One branch's answer: a step, or the error its engine raised."""

    branch: int
    step: EngineStep | None
    error: str | None = None


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent exits (best effort).

    Linux ties this to the thread that started the child: start groups from a thread that
    outlives them (the event loop's thread does).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except Exception:
        pass


def serve(fd: int, engine: str, game_file: str, count: str) -> None:
    """Group worker body: load `count` engines, then serve run/close requests on `fd`.

    `engine` is an engine name or its loader's `module:function` target.
    """
    _die_with_parent()
    conn = Connection(fd)
    from agentrl.envs.alfworld.engine import AlfworldEngine, open_engines

    engines: list[AlfworldEngine | None] = []
    try:  # TextWorld engines apply the compatibility patch themselves, here in the worker
        for branch, loaded in enumerate(open_engines(engine, game_file, int(count))):
            engines.append(loaded)
            conn.send(("loaded", branch))
    except Exception as exc:  # a game that cannot load: report it, then stop
        conn.send(("load_error", len(engines), _describe(exc)))
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

    _die_with_parent()
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
            conn.send(("error", _describe(exc)))
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
            conn.send(("report", BranchReport(branch, None, _describe(exc))))
        else:
            conn.send(("report", BranchReport(branch, step)))


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _stop_process(process: subprocess.Popen[bytes], grace: float = 0.0) -> None:
    """Terminate, then kill, `process` and reap it."""
    if grace > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    for stop in (process.terminate, process.kill):
        if process.poll() is not None:
            return
        stop()
        try:
            process.wait(2.0)
        except subprocess.TimeoutExpired:
            continue


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _readable(conn: Connection, timeout: float) -> bool:
    """Wait until `conn` has data (or EOF) without blocking the loop; False on timeout."""
    if conn.poll(0):
        return True
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    try:
        loop.add_reader(conn.fileno(), _wake, ready)
    except NotImplementedError:  # event loops without add_reader
        return await asyncio.to_thread(conn.poll, timeout)
    try:
        await asyncio.wait_for(ready, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(conn.fileno())


_CHILD_CODE = (
    "import importlib, sys; sys.path[:0] = {path!r}; "
    "module, _, name = sys.argv[1].rpartition(':'); "
    "getattr(importlib.import_module(module), name)(int(sys.argv[2]), *sys.argv[3:])"
)
"""A worker runs `module:function(fd, *argv)`: a body of this module (`serve`, `serve_calls`) or
another one's (`agentrl.envs.alfworld.pool:serve_pool`), named as a string, so no module here
imports the pool."""


class _Child:
    """A `python -c` child process talking over a socket pair, with timed receives."""

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        """The child's process id (None before it started or after it stopped)."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        """True while the child process runs."""
        return self._process is not None and self._process.poll() is None

    def _spawn(self, entry: str, *argv: str) -> None:
        """Start the worker running `entry` (`module:function`, or a function of this module)."""
        if ":" not in entry:
            entry = f"{__name__}:{entry}"
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.fileno()
        path = [p for p in sys.path if p]
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE.format(path=path), entry, str(child_fd), *argv],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._process = process
        self._finalizer = weakref.finalize(self, _stop_process, process)

    async def _receive(self, timeout: float, branch: int | None, doing: str) -> Any:
        conn = self._conn
        if conn is None:
            raise WorkerFailure("the worker is not running", branch)
        where = f"branch {branch}" if branch is not None else "the worker"
        if not await _readable(conn, timeout):
            self.kill()
            raise WorkerFailure(
                f"{where}: {doing} took longer than {timeout:g}s; the worker was killed", branch
            )
        try:
            return conn.recv()
        except (EOFError, OSError) as exc:
            code = self._process.poll() if self._process is not None else None
            self.kill()
            raise WorkerFailure(
                f"{where}: the worker died while {doing} (exit code {code})", branch
            ) from exc

    def _send(self, message: Any, branch: int | None) -> None:
        conn = self._conn
        if conn is None or not self.alive:
            self.kill()
            raise WorkerFailure("the worker is not running (it died or was stopped)", branch)
        try:
            conn.send(message)
        except (OSError, ValueError) as exc:
            self.kill()
            raise WorkerFailure(f"the worker is gone: {exc}", branch) from exc

    def kill(self) -> None:
        """Stop the process now (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            _stop_process(self._process)
            self._process = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    async def close(self, grace: float = 2.0) -> None:
        """Ask the process to exit, then make sure it did (idempotent)."""
        if self._conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(("close",))
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.to_thread(process.wait), grace)
        self.kill()


class GroupWorker(_Child):
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
        self._spawn("serve", target, self.game_file, str(self.count))
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


class CallWorker(_Child):
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
                self._spawn("serve_calls")
            self._send(("call", target, tuple(args)), None)
            status, value = await self._receive(timeout, None, f"running {target}")
            if status == "error":
                raise RuntimeError(f"{target} failed in the worker: {value}")
            return value
