"""The Ray executor: env groups played by Ray actors on a cluster (`pip install 'agentrl[ray]'`).

Each actor hosts a `GroupHost` (`agentrl.executors.host`) and plays one group at a time with
`env_cpus` CPUs reserved; actors are spread over the nodes (`SPREAD` scheduling), started on
demand up to `max_groups` (by default the cluster's CPUs divided by `env_cpus`: backpressure)
and reused across groups and updates. An actor that dies, or whose node dies, ends its group's
live branches with `env_error` and is replaced at the next borrow; a call past its timeout
kills the actor first. `close()` kills every actor this executor started and, when the
executor started Ray itself (no cluster was running and none was named), shuts Ray down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from agentrl._optional import require
from agentrl.core.types import TaskInfo
from agentrl.executors.host import DOING, GroupHost, GroupSource, HostReply, local_placement
from agentrl.executors.remote import RemoteFactory, RemoteGroup, Timeouts, WorkerLost, WorkerPool

__all__ = ["HostActor", "RayExecutor", "RayWorker"]

log = logging.getLogger(__name__)


class HostActor:
    """The body of one Ray actor (wrapped by `ray.remote` in the executor).

    A synchronous actor that drives the host's coroutines on its own event loop: it plays one
    group at a time, and a synchronous call cost Ray 1.1 ms per step where an async actor's
    cost 1.7 ms (`benchmarks/scale_out.py`'s latency probe)."""

    def __init__(self, source: GroupSource) -> None:
        self._loop = asyncio.new_event_loop()
        self._host = GroupHost(source)

    def where(self) -> str:
        """`node ID host NAME pid N` of this actor."""
        import ray

        return local_placement(ray.get_runtime_context().get_node_id()[:12])

    def call(self, method: str, args: tuple[object, ...]) -> HostReply:
        """One host call (`GroupHost.call`)."""
        return self._loop.run_until_complete(self._host.call(method, args))

    def shutdown(self) -> None:
        """Close every group and the env's factory."""
        self._loop.run_until_complete(self._host.shutdown())


class RayWorker:
    """Client of one `HostActor`."""

    def __init__(self, handle: Any, cpus: float) -> None:
        self._handle = handle
        self._cpus = cpus
        self._alive = True
        self._placement = "a Ray actor (starting)"

    @property
    def placement(self) -> str:
        """`node ID host NAME pid N` of the actor."""
        return self._placement

    @property
    def alive(self) -> bool:
        """False once the actor died or was killed."""
        return self._alive

    def kill(self) -> None:
        """Kill the actor now (idempotent)."""
        import ray

        if self._alive:
            self._alive = False
            try:
                ray.kill(self._handle, no_restart=True)
            except Exception as exc:  # already gone
                log.debug("killing a Ray actor: %s", exc)

    async def _await(self, ref: Any, timeout: float, doing: str) -> Any:
        import ray

        try:
            return await asyncio.wait_for(ref, timeout)
        except TimeoutError:
            self.kill()
            raise WorkerLost(
                f"{doing} took longer than {timeout:g}s; the Ray actor was killed"
            ) from None
        except ray.exceptions.RayError as exc:
            self.kill()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise WorkerLost(
                f"the Ray actor died while {doing} ({type(exc).__name__}: {first})"
            ) from exc

    async def start(self, timeout: float) -> None:
        """Wait until the actor runs and has built the env."""
        try:
            self._placement = await self._await(self._handle.where.remote(), timeout, "starting")
        except WorkerLost as exc:
            raise WorkerLost(
                f"{exc}: a Ray actor reserving {self._cpus:g} CPU(s) did not come up (does the "
                "cluster have a free CPU, see `ray status`, and agentrl installed on every node?)"
            ) from exc

    async def call(self, method: str, args: tuple[object, ...], timeout: float) -> HostReply:
        """One host call; `WorkerLost` past `timeout` (the actor is killed) or on its death."""
        if not self._alive:
            raise WorkerLost("the Ray actor is gone")
        doing = DOING.get(method, method)
        reply = await self._await(self._handle.call.remote(method, args), timeout, doing)
        assert isinstance(reply, HostReply)
        return reply

    async def stop(self) -> None:
        """Close the actor's groups, then kill it (idempotent)."""
        if not self._alive:
            return
        with contextlib.suppress(WorkerLost):
            await self._await(self._handle.shutdown.remote(), 10.0, "shutting down")
        self.kill()


class RayExecutor(RemoteFactory):
    """A `ClosableEnvFactory` whose groups run on Ray actors of a cluster.

    `address`: `auto` (the cluster `ray start` runs on this machine), `HOST:PORT`, or None
    (`$RAY_ADDRESS`, else a new local Ray instance that `close()` shuts down). `env_cpus`: CPUs
    each group's actor reserves. `max_groups`: the most groups in flight (actors alive).
    """

    def __init__(
        self,
        source: GroupSource,
        *,
        address: str | None = None,
        env_cpus: float = 1.0,
        max_groups: int | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        ray = require("ray", "ray", "the Ray executor")
        if env_cpus < 0:
            raise ValueError(f"env_cpus must be >= 0, got {env_cpus}")
        self.started_ray = False
        if not ray.is_initialized():
            ray.init(
                address=address,
                include_dashboard=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
            self.started_ray = address is None and not os.environ.get("RAY_ADDRESS")
        if max_groups is None:
            if env_cpus == 0:
                raise ValueError("env_cpus=0 needs max_groups (the most groups in flight)")
            cpus = float(ray.cluster_resources().get("CPU", 1.0))
            max_groups = max(1, int(cpus // env_cpus))
        self.source = source
        self.env_cpus = env_cpus
        timeouts = timeouts or Timeouts()
        actor_class = ray.remote(HostActor)

        async def start() -> RayWorker:
            handle = actor_class.options(
                num_cpus=env_cpus, scheduling_strategy="SPREAD", max_restarts=0
            ).remote(source)
            worker = RayWorker(handle, env_cpus)
            try:
                await worker.start(timeouts.start)
            except BaseException:
                worker.kill()
                raise
            return worker

        super().__init__(WorkerPool(start, max_groups), timeouts)

    def __call__(self, task: TaskInfo, group_size: int) -> RemoteGroup:
        """A group of `task`, played on a Ray actor from `reset()` on."""
        return super().__call__(task, group_size)

    async def close(self) -> None:
        """Kill every actor; shut Ray down when this executor started it (idempotent)."""
        await super().close()
        if self.started_ray:
            import ray

            self.started_ray = False
            ray.shutdown()
