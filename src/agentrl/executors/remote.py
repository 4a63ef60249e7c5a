"""The near side of the process and Ray executors: a pool of workers and the groups on them.

Both executors share one model. A *worker* (a child process, a Ray actor) hosts one group at a
time; the pool starts workers lazily, up to `size` (the most groups in flight: backpressure),
and reuses them across groups and updates. A group borrows a worker at `reset()` (waiting when
all are busy) and returns it at `close()`.

Failures stay with the group that met them. A call past its timeout (`step_timeout`,
`reset_timeout`) kills the worker; a worker that died (its process, actor or node) is dropped.
Either way the group's live branches end with `EnvStep.error` (`env_error`, left out of group
statistics), the other groups go on, and the next borrow starts a replacement. An exception the
environment raised is not a lost worker: that step is an `env_error` and the worker is kept.
`close()` stops every worker; after it no process or actor is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentrl.core.types import EnvAction, EnvStep, TaskInfo
from agentrl.executors.host import HostReply

__all__ = [
    "EnvBuildError",
    "RemoteEnvError",
    "RemoteFactory",
    "RemoteGroup",
    "Timeouts",
    "Worker",
    "WorkerLost",
    "WorkerPool",
]

log = logging.getLogger(__name__)


class WorkerLost(RuntimeError):
    """The worker hung past its timeout (it was killed) or died; its groups are lost."""


class RemoteEnvError(RuntimeError):
    """The env raised where it runs; the message is its description there (type, text and
    where it was raised)."""


class Worker(Protocol):
    """One process or actor hosting a `GroupHost` (`agentrl.executors.host`)."""

    @property
    def placement(self) -> str:
        """Where it runs (`node ... host ... pid ...`), for the records."""
        ...

    @property
    def alive(self) -> bool:
        """False once it died, was killed or was stopped."""
        ...

    async def start(self, timeout: float) -> None:
        """Come up and build the env (`EnvBuildError` if it cannot be built, `WorkerLost` if
        the worker does not come up within `timeout` seconds)."""
        ...

    async def call(self, method: str, args: tuple[object, ...], timeout: float) -> HostReply:
        """Run a host call; raise `WorkerLost` (and kill the worker) past `timeout` seconds or
        when the worker is gone."""
        ...

    async def stop(self) -> None:
        """Shut the host down and end the worker (idempotent)."""
        ...

    def kill(self) -> None:
        """End the worker now, without asking (idempotent)."""
        ...


class EnvBuildError(RuntimeError):
    """The env could not be built where the groups run (the source raised there): every group
    would fail the same way, so the pool remembers it and starts no more workers."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds a worker may take before it is killed and its group's branches end."""

    start: float = 120.0
    """To start (a process's imports, an actor's scheduling) and build the env's factory."""
    reset: float = 120.0
    """To create and reset a group."""
    step: float = 300.0
    """To step a group (all its branches' actions of one step)."""

    def __post_init__(self) -> None:
        for name in ("start", "reset", "step"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Timeouts.{name} must be > 0, got {getattr(self, name)}")


class WorkerPool:
    """At most `size` workers, made by `make()` and started on demand, each hosting one group
    at once."""

    def __init__(self, make: Callable[[], Worker], size: int, start_timeout: float) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs size >= 1, got {size}")
        self.size = size
        self._make = make
        self._start_timeout = start_timeout
        self._idle: list[Worker] = []
        self._busy: set[int] = set()
        self._workers: dict[int, Worker] = {}
        self._free = asyncio.Semaphore(size)
        self._closed = False
        self._broken: EnvBuildError | None = None
        self.started = 0
        """Workers started so far (replacements included)."""

    @property
    def workers(self) -> tuple[Worker, ...]:
        """The workers alive now (idle or busy)."""
        return tuple(w for w in self._workers.values() if w.alive)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the environment executor is closed")
        if self._broken is not None:
            raise self._broken

    async def borrow(self) -> Worker:
        """An idle live worker, or a new one; waits while `size` are busy. Raises
        `EnvBuildError` (at once, once one worker met it) when the env cannot be built."""
        self._check_open()
        await self._free.acquire()
        try:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    self._busy.add(id(worker))
                    return worker
                self._workers.pop(id(worker), None)
            self._check_open()
            worker = await self._start()
            self.started += 1
            if self._closed:  # closed while it started: it must not outlive the pool
                worker.kill()
                raise RuntimeError("the environment executor is closed")
        except BaseException:
            self._free.release()
            raise
        self._workers[id(worker)] = worker
        self._busy.add(id(worker))
        return worker

    async def _start(self) -> Worker:
        """A new started worker; one that fails or is cancelled while starting is killed (no
        process or actor is left behind), and a build failure is remembered."""
        worker = self._make()
        try:
            await worker.start(self._start_timeout)
        except EnvBuildError as exc:
            self._broken = exc
            worker.kill()
            raise
        except BaseException:
            worker.kill()
            raise
        return worker

    async def give_back(self, worker: Worker) -> None:
        """Return a borrowed worker; a dead one is dropped (the next borrow replaces it). The
        bookkeeping is done before anything is awaited, so a cancel cannot lose the slot."""
        if id(worker) not in self._busy:
            return
        self._busy.discard(id(worker))
        keep = worker.alive and not self._closed
        if keep:
            self._idle.append(worker)
        else:
            self._workers.pop(id(worker), None)
        self._free.release()
        if not keep:
            await _stop(worker)

    async def close(self) -> None:
        """Stop every worker, idle or busy (idempotent)."""
        self._closed = True
        workers, self._workers, self._idle = list(self._workers.values()), {}, []
        for worker in workers:
            await _stop(worker)


async def _stop(worker: Worker) -> None:
    """Stop `worker`; kill it when stopping fails (logged, never raised)."""
    try:
        await worker.stop()
    except Exception as exc:
        log.warning("stopping an environment worker failed: %s", exc)
    finally:
        worker.kill()


def _lost_steps(
    current: Sequence[EnvStep], actions: Sequence[EnvAction | None], error: str
) -> list[EnvStep]:
    """Each branch that got an action ends with `error`; the others keep their step."""
    return [
        step if action is None or step.finished else EnvStep(observation="", error=error)
        for step, action in zip(current, actions, strict=True)
    ]


class RemoteGroup:
    """An `EnvGroup` played by a pool's worker (it borrows one at `reset`)."""

    def __init__(
        self, pool: WorkerPool, task: TaskInfo, size: int, key: int, timeouts: Timeouts
    ) -> None:
        self._pool = pool
        self._task = task
        self._size = size
        self._key = key
        self._timeouts = timeouts
        self._worker: Worker | None = None
        self._current: list[EnvStep] = []
        self._lost: str | None = None
        self._placement: str | None = None
        self._closed = False

    @property
    def task(self) -> TaskInfo:
        """The task these branches play."""
        return self._task

    @property
    def size(self) -> int:
        """Number of branches K."""
        return self._size

    @property
    def placement(self) -> str | None:
        """Where the group is played (None before `reset`; kept after `close`)."""
        return self._placement

    async def _call(self, method: str, args: tuple[object, ...], timeout: float) -> HostReply:
        assert self._worker is not None
        try:
            return await self._worker.call(method, args, timeout)
        except WorkerLost as exc:
            self._lost = f"{exc} (on {self._worker.placement})"
            raise

    async def _open(self) -> HostReply:
        """Borrow a worker and create the group there; a worker found dead (an idle actor whose
        node went away) is given back and one more is borrowed."""
        for attempt in (1, 2):
            self._worker = await self._pool.borrow()
            self._placement = self._worker.placement
            try:
                return await self._call(
                    "open", (self._key, self._task, self._size), self._timeouts.reset
                )
            except WorkerLost:
                if attempt == 2:
                    raise
                worker, self._worker, self._lost = self._worker, None, None
                await asyncio.shield(self._pool.give_back(worker))
        raise AssertionError("unreachable")

    async def reset(self) -> list[EnvStep]:
        """Borrow a worker, create the group there and reset it."""
        if self._closed:
            raise RuntimeError("reset() after close() on a remote group")
        if self._worker is not None:
            raise RuntimeError("reset() was called twice on a remote group")
        reply = await self._open()
        if reply.error is None:
            reply = await self._call("reset", (self._key,), self._timeouts.reset)
        if reply.error is not None:
            raise RemoteEnvError(reply.error)
        self._current = list(reply.steps)
        return list(self._current)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Step on the worker; a lost worker ends every branch that got an action."""
        if len(actions) != self._size:
            raise ValueError(f"step() needs {self._size} actions, got {len(actions)}")
        if self._lost is not None:
            return _lost_steps(self._current, actions, self._lost)
        if self._worker is None:
            raise RuntimeError("step() before reset() on a remote group")
        try:
            reply = await self._call("step", (self._key, list(actions)), self._timeouts.step)
        except WorkerLost:
            assert self._lost is not None
            self._current = _lost_steps(self._current, actions, self._lost)
            return list(self._current)
        if reply.error is not None:  # the env raised: that step's branches end, as in process
            self._current = _lost_steps(self._current, actions, reply.error)
            return list(self._current)
        self._current = list(reply.steps)
        return list(self._current)

    async def close(self) -> None:
        """Close the group on its worker and give the worker back (idempotent)."""
        if self._closed:
            return
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        try:
            if self._lost is None and worker.alive:
                with contextlib.suppress(WorkerLost):
                    await worker.call("close_group", (self._key,), self._timeouts.reset)
        finally:  # even when cancelled: the slot goes back to the pool
            await asyncio.shield(self._pool.give_back(worker))


class RemoteFactory:
    """A `ClosableEnvFactory` whose groups run on a `WorkerPool` (the executors' shared part)."""

    def __init__(self, pool: WorkerPool, timeouts: Timeouts) -> None:
        self.pool = pool
        self.timeouts = timeouts
        self._keys = itertools.count()

    def __call__(self, task: TaskInfo, group_size: int) -> RemoteGroup:
        """A group of `group_size` branches of `task`, placed on a worker at `reset()`."""
        return RemoteGroup(self.pool, task, group_size, next(self._keys), self.timeouts)

    async def close(self) -> None:
        """Stop every worker of the pool (idempotent)."""
        await self.pool.close()
