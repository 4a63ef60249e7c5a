"""Child processes that serve requests over a socket pair, and their async client.

A worker is a plain `python -c` subprocess (not a `multiprocessing` child), so it never
re-imports the user's main script: scripts without an `if __name__ == "__main__":` guard and
notebooks work alike. It runs `module:function(fd, *argv)` and answers on `fd`; the client
(`ChildProcess`) waits for each answer with a timeout and, when none comes (a hang) or the
connection breaks (a dead worker), kills the process and raises `WorkerFailure`. On Linux a
worker dies with its parent. The ALFWorld workers and the process executor are built on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any

__all__ = [
    "CHILD_CODE",
    "ChildProcess",
    "WorkerFailure",
    "become_worker",
    "describe_error",
    "die_with_parent",
    "readable",
    "stop_process",
]


class WorkerFailure(RuntimeError):
    """The worker hung past its timeout or died; it has been killed."""

    def __init__(self, message: str, branch: int | None) -> None:
        super().__init__(message)
        self.branch = branch
        """The branch that was being loaded or stepped, when known."""


def become_worker() -> None:
    """What every worker body does first: die with its parent (`die_with_parent`) and ignore
    SIGINT, which a terminal's Ctrl-C sends to the whole process group: the parent decides
    when its workers stop (it closes or kills them), so an interrupt never reads as a crash."""
    import signal

    die_with_parent()
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def die_with_parent() -> None:
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


def describe_error(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def stop_process(process: subprocess.Popen[bytes], grace: float = 0.0) -> None:
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


async def readable(conn: Connection, timeout: float) -> bool:
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


CHILD_CODE = (
    "import importlib, sys; sys.path[:0] = {path!r}; "
    "module, _, name = sys.argv[1].rpartition(':'); "
    "getattr(importlib.import_module(module), name)(int(sys.argv[2]), *sys.argv[3:])"
)
"""A worker runs `module:function(fd, *argv)`, named as a string (`agentrl.executors.process:
serve_host`, `agentrl.envs.alfworld.pool:serve_pool`), so this module imports none of them."""


class ChildProcess:
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
        """Start the worker running `entry` (`module:function`) with `argv` after the fd."""
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.fileno()
        path = [p for p in sys.path if p]
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", CHILD_CODE.format(path=path), entry, str(child_fd), *argv],
                pass_fds=(child_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._process = process
        self._finalizer = weakref.finalize(self, stop_process, process)

    async def _receive(self, timeout: float, branch: int | None, doing: str) -> Any:
        conn = self._conn
        if conn is None:
            raise WorkerFailure("the worker is not running", branch)
        where = f"branch {branch}: " if branch is not None else ""
        try:
            ready = await readable(conn, timeout)
        except asyncio.CancelledError:
            self.kill()  # its answer would be read by the next request: the worker is done for
            raise
        if not ready:
            self.kill()
            raise WorkerFailure(
                f"{where}{doing} took longer than {timeout:g}s; the worker was killed", branch
            )
        try:
            return conn.recv()
        except (EOFError, OSError) as exc:
            code = await asyncio.to_thread(self._exit_code)
            self.kill()
            raise WorkerFailure(
                f"{where}the worker died while {doing} (exit code {code})", branch
            ) from exc

    def _exit_code(self, within: float = 1.0) -> int | None:
        """The exit code of a worker whose connection broke (it may take a moment to exit);
        None when it still runs after `within` seconds."""
        if self._process is None:
            return None
        try:
            return self._process.wait(within)
        except subprocess.TimeoutExpired:
            return None

    def _send(self, message: Any, branch: int | None) -> None:
        conn = self._conn
        if conn is None or not self.alive:
            self.kill()
            raise WorkerFailure("the worker is not running (it died or was stopped)", branch)
        try:
            conn.send(message)
        except (OSError, ValueError) as exc:
            # a broken pipe is a worker that died before `alive` could see it (a SIGKILL not
            # yet reaped): reported as the receiving side reports a death
            code = self._process.poll() if self._process is not None else None
            self.kill()
            raise WorkerFailure(
                f"the worker died: sending it a request failed ({exc}; exit code {code})", branch
            ) from exc

    def kill(self) -> None:
        """Stop the process now (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            stop_process(self._process)
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
