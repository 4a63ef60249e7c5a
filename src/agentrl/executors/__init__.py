"""Where environment groups run: in process, in local worker processes, or on a Ray cluster.

`executor_factory(source, ExecutorOptions(kind=...))` turns a `GroupSource` (something that
builds an env's `EnvGroupFactory` where the groups run) into the factory the rollout engine
uses; close it when done. See docs/scale-out.md.
"""

from agentrl.executors.host import GroupHost, GroupSource, HostReply
from agentrl.executors.options import (
    ExecutorKind,
    ExecutorOptions,
    InProcessExecutor,
    executor_factory,
)
from agentrl.executors.remote import RemoteFactory, RemoteGroup, Timeouts, WorkerLost, WorkerPool

__all__ = [
    "ExecutorKind",
    "ExecutorOptions",
    "GroupHost",
    "GroupSource",
    "HostReply",
    "InProcessExecutor",
    "RemoteFactory",
    "RemoteGroup",
    "Timeouts",
    "WorkerLost",
    "WorkerPool",
    "executor_factory",
]
