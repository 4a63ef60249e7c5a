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
from agentrl.core.types import TaskInfo
from agentrl.executors.child import ChildProcess, WorkerFailure, die_with_parent
from agentrl.executors.host import DOING, GroupHost, GroupSource, HostReply, local_placement
from agentrl.executors.remote import RemoteFactory, RemoteGroup, Timeouts, WorkerLost, WorkerPool

__all__ = ["ProcessExecutor", "ProcessWorker", "check_picklable", "default_workers", "serve_host"]


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_picklable(source: GroupSource, executor: str) -> None:
    """Raise `TypeError` naming the fix when `source` cannot travel to a worker."""
    try:
        pickle.dumps(source)
    except Exception as exc:
        raise TypeError(
            f"the {executor} executor sends the group source {source!r} to its workers, and it "
            f"does not pickle ({type(exc).__name__}: {exc}); use a module-level function, a "
            "functools.partial of one, or a frozen dataclass with __call__ (e.g. "
            "agentrl.config.SpecGroupSource for an installed env)"
        ) from exc


def serve_host(fd: int) -> None:
    """Worker body: receive the group source, build a `GroupHost`, serve calls until closed."""
    die_with_parent()
    conn = Connection(fd)
    loop = asyncio.new_event_loop()
    try:
        source = conn.recv()
        host = GroupHost(source)
    except Exception as exc:
        conn.send(("error", f"the environment could not be built: {describe_exception(exc)}"))
        conn.close()
        return
    conn.send(("ready", local_placement()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break  # the parent went away
        if request[0] == "close":
            break
        _, method, args = request
        conn.send(("reply", loop.run_until_complete(host.call(method, args))))
    loop.run_until_complete(host.shutdown())
    loop.close()
    conn.close()


class ProcessWorker(ChildProcess):
    """Client of one worker process hosting a `GroupHost`."""

    def __init__(self) -> None:
        super().__init__()
        self._placement = "a worker process (starting)"

    @property
    def placement(self) -> str:
        """`host NAME pid N` of the worker process."""
        return self._placement

    async def start(self, source: GroupSource, timeout: float) -> None:
        """Start the process and build the env there; `WorkerLost` if it does not come up."""
        self._spawn(f"{__name__}:serve_host")
        try:
            self._send(source, None)
            message = await self._receive(timeout, None, "starting")
        except WorkerFailure as exc:
            raise WorkerLost(str(exc)) from exc
        if message[0] != "ready":
            self.kill()
            raise WorkerLost(message[1])
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
        assert isinstance(reply, HostReply)
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

        async def start() -> ProcessWorker:
            worker = ProcessWorker()
            await worker.start(source, timeouts.start)
            return worker

        super().__init__(WorkerPool(start, workers or default_workers()), timeouts)

    def __call__(self, task: TaskInfo, group_size: int) -> RemoteGroup:
        """A group of `task`, played in a worker process from `reset()` on."""
        return super().__call__(task, group_size)
