"""The process executor: env groups played in local worker processes.

Each worker is a `python -c` child (`agentrl.executors.child`) that receives the executor's
`GroupSource` once, builds the env's group factory and then serves one group at a time for the
client's `RemoteGroup` (`agentrl.executors.remote`). Blocking environment work never runs on
the trainer's event loop, several groups step on several cores at once, and a hung or crashed
environment is killed without touching the rest of the batch.
"""

from __future__ import annotations

import asyncio
import os
import pickle
from multiprocessing.connection import Connection

from agentrl.core.errors import describe_exception
from agentrl.executors.child import ChildProcess, WorkerFailure, become_worker, readable
from agentrl.executors.host import DOING, GroupHost, GroupSource, HostReply, local_placement
from agentrl.executors.remote import (
    EnvBuildError,
    RemoteFactory,
    Timeouts,
    WorkerLost,
    WorkerPool,
)

__all__ = ["ProcessExecutor", "ProcessWorker", "check_picklable", "default_workers", "serve_host"]


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_picklable(source: GroupSource, executor: str) -> None:
    """Raise `TypeError` naming the fix when `source` cannot travel to a worker: it does not
    pickle, or it lives in `__main__` (a script or notebook), which a worker cannot import."""
    target = getattr(source, "func", source)  # a functools.partial's function
    module = getattr(target, "__module__", None) or type(target).__module__
    if module == "__main__":
        raise TypeError(
            f"the {executor} executor sends the group source {source!r} to its workers, which "
            "cannot import what a script or notebook defines (__main__): define it in an "
            "importable module (a .py file next to the script), or use the ray executor "
            "(which ships such code by value)"
        )
    try:
        pickle.dumps(source)
    except Exception as exc:
        raise TypeError(
            f"the {executor} executor sends the group source {source!r} to its workers, and it "
            f"does not pickle ({type(exc).__name__}: {exc}); use a module-level function, a "
            "functools.partial of one, or a frozen dataclass with __call__ (e.g. "
            "agentrl.config.SpecGroupSource for an installed env)"
        ) from exc


def _answer(conn: Connection, reply: HostReply) -> None:
    """Send `reply`; one that does not pickle (an `EnvStep.info` value that is not a scalar)
    becomes an error reply naming the cause instead of a dead worker."""
    try:
        conn.send(("reply", reply))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        error = (
            f"the env's answer does not pickle ({type(exc).__name__}: {exc}): an EnvStep must "
            "hold plain values (info: str, int, float or bool)"
        )
        conn.send(("reply", HostReply(error=error)))


async def _serve(conn: Connection, host: GroupHost) -> None:
    """Answer calls one at a time; the loop keeps running between them, so an env's own
    background tasks (a server session's reader) run as they would in process."""
    while True:
        if not await readable(conn, 3600.0):
            continue
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break  # the parent went away
        if request[0] == "close":
            break
        _, method, args = request
        _answer(conn, await host.call(method, args))
    await host.shutdown()


def serve_host(fd: int) -> None:
    """Worker body: receive the group source, build a `GroupHost`, serve calls until closed."""
    become_worker()
    conn = Connection(fd)
    try:
        source = conn.recv()
        host = GroupHost(source)
    except Exception as exc:
        conn.send(("error", f"the environment could not be built: {describe_exception(exc)}"))
        conn.close()
        return
    conn.send(("ready", local_placement()))
    asyncio.run(_serve(conn, host))
    conn.close()


class ProcessWorker(ChildProcess):
    """Client of one worker process hosting a `GroupHost`."""

    def __init__(self, source: GroupSource) -> None:
        super().__init__()
        self._source = source
        self._placement = "a worker process (starting)"

    @property
    def placement(self) -> str:
        """`host NAME pid N` of the worker process."""
        return self._placement

    async def start(self, timeout: float) -> None:
        """Start the process and build the env there; `WorkerLost` if it does not come up,
        `EnvBuildError` if the env cannot be built (the pool kills it either way)."""
        self._spawn(f"{__name__}:serve_host")
        try:
            self._send(self._source, None)
            message = await self._receive(timeout, None, "starting")
        except WorkerFailure as exc:
            raise WorkerLost(str(exc)) from exc
        if message[0] != "ready":
            raise EnvBuildError(message[1])
        self._placement = message[1]

    async def call(self, method: str, args: tuple[object, ...], timeout: float) -> HostReply:
        """One host call; `WorkerLost` past `timeout` (the process is killed) or on death."""
        async with self._lock:
            try:
                self._send(("call", method, args), None)
                message = await self._receive(timeout, None, DOING.get(method, method))
            except WorkerFailure as exc:
                raise WorkerLost(str(exc)) from exc
        reply = message[1]
        if message[0] != "reply" or not isinstance(reply, HostReply):
            self.kill()
            raise WorkerLost(f"unexpected message from the worker: {message!r}")
        return reply

    async def stop(self) -> None:
        """Ask the worker to close its groups and exit; kill it if it does not (idempotent)."""
        await self.close()


class ProcessExecutor(RemoteFactory):
    """A `ClosableEnvFactory` whose groups run in up to `workers` local worker processes."""

    def __init__(
        self,
        source: GroupSource,
        *,
        workers: int | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        check_picklable(source, "process")
        self.source = source
        timeouts = timeouts or Timeouts()
        pool = WorkerPool(
            lambda: ProcessWorker(source), workers or default_workers(), timeouts.start
        )
        super().__init__(pool, timeouts)
