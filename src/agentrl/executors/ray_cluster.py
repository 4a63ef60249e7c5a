"""The Ray executor: env groups played by Ray actors on a cluster (`pip install 'agentrl[ray]'`).

Each actor hosts a `GroupHost` (`agentrl.executors.host`) and plays one group at a time with
`env_cpus` CPUs reserved; actors are spread over the nodes (`SPREAD` scheduling), started on
demand up to `max_groups` (by default the cluster's CPUs divided by `env_cpus`: backpressure)
and reused across groups and updates. An actor that dies, or whose node dies, ends its group's
live branches with `env_error` and is replaced at the next borrow; a call past its timeout
kills the actor first. `close()` kills every actor this executor started and, when the
executor connected this process to Ray, disconnects (a Ray instance it started stops with it;
a running cluster is left running).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentrl._optional import require
from agentrl.core.errors import describe_exception
from agentrl.executors.host import DOING, GroupHost, GroupSource, HostReply, local_placement
from agentrl.executors.remote import (
    EnvBuildError,
    RemoteFactory,
    Timeouts,
    WorkerLost,
    WorkerPool,
)

__all__ = ["HostActor", "RayExecutor", "RayWorker"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class HostActor:
    """The body of one Ray actor (wrapped by `ray.remote` in the executor).

    A synchronous actor (a synchronous call cost Ray 1.1 ms per step where an async actor's
    cost 1.7 ms, `benchmarks/scale_out.py`'s latency probe) whose host runs on an event loop in
    a thread of its own (1.24 ms with that hop), so that an env's background tasks run between
    calls too. An env that
    cannot be built is reported by `where()`, never raised from the constructor (Ray would
    report a dead actor, not the cause)."""

    def __init__(self, source: GroupSource) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._host: GroupHost | None = None
        self._error: str | None = None
        try:
            self._host = self._run(_build(source))
        except Exception as exc:
            self._error = f"the environment could not be built: {describe_exception(exc)}"

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def where(self) -> tuple[str, str]:
        """`("ready", "node ID host NAME pid N")`, or `("error", why the env was not built)`."""
        import ray

        if self._error is not None:
            return "error", self._error
        return "ready", local_placement(ray.get_runtime_context().get_node_id()[:12])

    def call(self, method: str, args: tuple[object, ...]) -> HostReply:
        """One host call (`GroupHost.call`)."""
        assert self._host is not None
        return self._run(self._host.call(method, args))

    def shutdown(self) -> None:
        """Close every group and the env's factory."""
        if self._host is not None:
            self._run(self._host.shutdown())


async def _build(source: GroupSource) -> GroupHost:
    """The host, built on the actor's loop (an env may start tasks as it is built)."""
    return GroupHost(source)


def _ray_cause(exc: BaseException) -> str:
    """A Ray error's type and text, with the cause Ray wraps (an actor's own exception) when
    there is one; long texts are cut at 500 characters."""
    cause = getattr(exc, "cause", None)
    text = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(cause, BaseException):
        text = f"{text} (cause: {type(cause).__name__}: {cause})"
    return text if len(text) <= 500 else text[:497] + "..."


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
        except asyncio.CancelledError:
            self.kill()  # a call cut short (an interrupt) may still run there: end the actor
            raise
        except TimeoutError:
            self.kill()
            raise WorkerLost(
                f"{doing} took longer than {timeout:g}s; the Ray actor was killed"
            ) from None
        except ray.exceptions.RayError as exc:
            self.kill()
            raise WorkerLost(f"the Ray actor died while {doing} ({_ray_cause(exc)})") from exc

    async def start(self, timeout: float) -> None:
        """Wait until the actor runs and has built the env (`EnvBuildError` if it could not)."""
        try:
            status, text = await self._await(self._handle.where.remote(), timeout, "starting")
        except WorkerLost as exc:
            raise WorkerLost(
                f"{exc}: a Ray actor reserving {self._cpus:g} CPU(s) did not come up (does the "
                "cluster have a free CPU, see `ray status`, and agentrl installed on every node?)"
            ) from exc
        if status != "ready":
            raise EnvBuildError(text)
        self._placement = text

    async def call(self, method: str, args: tuple[object, ...], timeout: float) -> HostReply:
        """One host call; `WorkerLost` past `timeout` (the actor is killed) or on its death."""
        if not self._alive:
            raise WorkerLost("the Ray actor is gone")
        doing = DOING.get(method, method)
        reply = await self._await(self._handle.call.remote(method, args), timeout, doing)
        if not isinstance(reply, HostReply):
            self.kill()
            raise WorkerLost(f"unexpected answer from the Ray actor: {reply!r}")
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
    (`$RAY_ADDRESS`, else a cluster `ray start` runs here, else a new local Ray instance that
    `close()` stops). A process already connected to Ray keeps its connection. `env_cpus`: CPUs
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
        if max_groups is None and env_cpus == 0:
            raise ValueError("env_cpus=0 needs max_groups (the most groups in flight)")
        self.connected = False
        """Whether this executor connected this process to Ray (then `close()` disconnects:
        a Ray instance it started stops, a running cluster is left running)."""
        if not ray.is_initialized():
            ray.init(
                address=address,
                include_dashboard=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
            self.connected = True
        if max_groups is None:
            cpus = float(ray.cluster_resources().get("CPU", 1.0))
            max_groups = max(1, int(cpus // env_cpus))
        self.source = source
        self.env_cpus = env_cpus
        timeouts = timeouts or Timeouts()
        actor_class = ray.remote(HostActor)

        def make() -> RayWorker:
            handle = actor_class.options(
                num_cpus=env_cpus, scheduling_strategy="SPREAD", max_restarts=0
            ).remote(source)
            return RayWorker(handle, env_cpus)

        super().__init__(WorkerPool(make, max_groups, timeouts.start), timeouts)

    async def close(self) -> None:
        """Kill every actor; shut Ray down when this executor started it (idempotent)."""
        await super().close()
        if self.connected:
            import ray

            self.connected = False
            ray.shutdown()
