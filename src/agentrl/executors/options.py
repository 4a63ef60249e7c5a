"""Choosing an executor: `ExecutorOptions` and `executor_factory`.

| executor   | where groups run                  | for                                          |
|------------|-----------------------------------|----------------------------------------------|
| inprocess  | the trainer's event loop          | async or light envs (the default)            |
| process    | local worker processes            | CPU-bound or fragile envs on one machine     |
| ray        | Ray actors on a cluster's nodes   | envs heavier than one machine, many episodes |

Any `GroupSource` runs under any executor unchanged; only `inprocess` accepts one that does not
pickle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from agentrl.core.env import ClosableEnvFactory, EnvGroup, EnvGroupFactory, close_env_factory
from agentrl.core.types import TaskInfo
from agentrl.executors.host import GroupSource
from agentrl.executors.remote import Timeouts

__all__ = ["ExecutorKind", "ExecutorOptions", "InProcessExecutor", "executor_factory"]


class ExecutorKind(StrEnum):
    """Where env groups run (`--env-executor`)."""

    INPROCESS = "inprocess"
    PROCESS = "process"
    RAY = "ray"


@dataclass(frozen=True)
class ExecutorOptions:
    """What `executor_factory` builds."""

    kind: ExecutorKind = ExecutorKind.INPROCESS
    max_groups: int | None = None
    """The most groups in flight (workers or actors alive); None: one per CPU of the machine
    (process) or of the cluster divided by `env_cpus` (ray)."""
    ray_address: str | None = None
    """`auto`, `HOST:PORT`, or None (`$RAY_ADDRESS`, else a cluster `ray start` runs on this
    machine, else a new local Ray instance)."""
    env_cpus: float = 1.0
    """CPUs each group's Ray actor reserves."""
    timeouts: Timeouts = field(default_factory=Timeouts)
    """Start / reset / step bounds of a worker (process and ray)."""

    def __post_init__(self) -> None:
        if self.max_groups is not None and self.max_groups < 1:
            raise ValueError(f"max_groups must be >= 1, got {self.max_groups}")


class InProcessExecutor:
    """Groups built and played in this process (the source's factory, used as it is)."""

    def __init__(self, source: GroupSource) -> None:
        self.source = source
        self._factory: EnvGroupFactory | None = None

    def __call__(self, task: TaskInfo, group_size: int) -> EnvGroup:
        """The source factory's group of `task` (the factory is built on the first call)."""
        if self._factory is None:
            self._factory = self.source()
        return self._factory(task, group_size)

    async def close(self) -> None:
        """Close the source's factory when it holds a resource (idempotent)."""
        factory, self._factory = self._factory, None
        if factory is not None:
            await close_env_factory(factory)


def executor_factory(source: GroupSource, options: ExecutorOptions) -> ClosableEnvFactory:
    """The env-group factory of `source` under the chosen executor; close it when done."""
    if options.kind is ExecutorKind.PROCESS:
        from agentrl.executors.process import ProcessExecutor

        return ProcessExecutor(source, workers=options.max_groups, timeouts=options.timeouts)
    if options.kind is ExecutorKind.RAY:
        from agentrl.executors.ray_cluster import RayExecutor

        return RayExecutor(
            source,
            address=options.ray_address,
            env_cpus=options.env_cpus,
            max_groups=options.max_groups,
            timeouts=options.timeouts,
        )
    return InProcessExecutor(source)
