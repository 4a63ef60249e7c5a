"""The far side of an executor: a `GroupHost` plays env groups where it lives.

A worker process or a Ray actor holds one `GroupHost`. It builds its env's group factory once,
from the executor's `GroupSource`, and then opens, resets, steps and closes groups by key for
the client (`agentrl.executors.remote.RemoteGroup`). Every call returns a `HostReply`: the
result, or the error the environment raised described with where it was raised, so that the
client can tell an environment failure (the worker is fine) from a lost worker.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrl.core.env import EnvGroup, EnvGroupFactory, close_env_factory
from agentrl.core.errors import describe_exception
from agentrl.core.types import EnvAction, EnvStep, TaskInfo

__all__ = ["DOING", "GroupHost", "GroupSource", "HostReply", "local_placement"]

GroupSource = Callable[[], EnvGroupFactory]
"""Builds, where the groups run, the group factory of their env. It travels to each worker, so
it must pickle: a module-level function, a `functools.partial` of one, or a frozen dataclass
with `__call__` (`agentrl.config.SpecGroupSource` names an installed env and its config)."""


DOING = {
    "open": "creating a group",
    "reset": "resetting",
    "step": "stepping",
    "close_group": "closing a group",
}
"""What the worker was doing during each host call, for error messages."""


@dataclass(frozen=True)
class HostReply:
    """The outcome of one host call: `steps` (reset, step), or `error` when the env raised."""

    steps: tuple[EnvStep, ...] = ()
    error: str | None = None


def local_placement(node: str | None = None) -> str:
    """`host HOSTNAME pid N` (with `node ID` first when a cluster names its node)."""
    where = f"host {socket.gethostname()} pid {os.getpid()}"
    return f"node {node} {where}" if node else where


class GroupHost:
    """Plays the groups one worker hosts: builds the factory once, then serves calls by key."""

    def __init__(self, source: GroupSource) -> None:
        self._factory = source()
        self._groups: dict[int, EnvGroup] = {}

    async def open(self, key: int, task: TaskInfo, size: int) -> HostReply:
        """Create the group `key` of `size` branches of `task` (not yet reset)."""
        try:
            self._groups[key] = self._factory(task, size)
        except Exception as exc:
            return HostReply(error=describe_exception(exc))
        return HostReply()

    async def reset(self, key: int) -> HostReply:
        """Reset group `key`; its K initial steps."""
        try:
            return HostReply(steps=tuple(await self._groups[key].reset()))
        except Exception as exc:
            return HostReply(error=describe_exception(exc))

    async def step(self, key: int, actions: Sequence[EnvAction | None]) -> HostReply:
        """Step group `key` (None: leave that branch as it is); the K current steps."""
        try:
            return HostReply(steps=tuple(await self._groups[key].step(actions)))
        except Exception as exc:
            return HostReply(error=describe_exception(exc))

    async def close_group(self, key: int) -> HostReply:
        """Close and forget group `key` (unknown keys are ignored)."""
        group = self._groups.pop(key, None)
        if group is None:
            return HostReply()
        try:
            await group.close()
        except Exception as exc:
            return HostReply(error=describe_exception(exc))
        return HostReply()

    async def shutdown(self) -> None:
        """Close every open group, then the factory (when it holds a resource)."""
        for key in list(self._groups):
            await self.close_group(key)
        with contextlib.suppress(Exception):
            await close_env_factory(self._factory)

    async def call(self, method: str, args: tuple[object, ...]) -> HostReply:
        """Run one of `open`, `reset`, `step`, `close_group` by name (the wire form)."""
        if method == "open":
            key, task, size = args
            assert isinstance(key, int) and isinstance(task, TaskInfo) and isinstance(size, int)
            return await self.open(key, task, size)
        if method == "step":
            key, actions = args
            assert isinstance(key, int) and isinstance(actions, list)
            return await self.step(key, actions)
        (key,) = args
        assert isinstance(key, int)
        if method == "reset":
            return await self.reset(key)
        if method == "close_group":
            return await self.close_group(key)
        return HostReply(error=f"unknown host call {method!r}")
