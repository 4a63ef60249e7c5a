"""Playing games for training: the seeded game streams of a run and `play_tasks`, the
rollout function a `GroupSource` calls (a plain function, bound to the run's env factory,
renderer, protocol, budgets and reward; it never calls into the trainer)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentrl.algo.rewards import Reward
from agentrl.backends.base import Sampler
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.progress import progress_bar
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.rollout import RolloutConfig, group_id_at, rollout_batch, rollout_group
from agentrl.rollout.config import labelled_config
from agentrl.tools import ToolProtocol

__all__ = [
    "DYNAMIC_SEED_OFFSET",
    "GroupHook",
    "GroupPlayer",
    "Rollout",
    "RolloutFn",
    "extra_batch",
    "labelled_config",
    "play_group",
    "play_tasks",
    "play_with_player",
    "task_batch",
]

DYNAMIC_SEED_OFFSET = 1_000_000_007
"""Added to the run's seed for the stream of games that replace degenerate groups."""


@dataclass(frozen=True)
class Rollout:
    """The groups of one rollout call and when its sampler was taken."""

    groups: tuple[TrajectoryGroup, ...]
    version: int
    """Updates completed when the rollout's sampler was taken."""
    group_seconds: tuple[float, ...] = ()
    """Seconds from the rollout's start until each group finished (in finishing order)."""


GroupHook = Callable[[TrajectoryGroup], None]
"""Called with each group as soon as its rollout finishes."""


class RolloutFn(Protocol):
    """`rollout(tasks, sampler, version, label, on_group=None)`: play `tasks` with `sampler`
    (taken after `version` updates), calling `on_group` as each group finishes."""

    def __call__(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: GroupHook | None = None,
    ) -> Awaitable[Rollout]:
        """The groups of `tasks`, with when each finished."""
        ...


def task_batch(tasks: Sequence[TaskInfo], batch_size: int, seed: int, index: int) -> list[TaskInfo]:
    """Batch `index` of the endless stream of seeded passes over `tasks` (sorted by id first).

    Each pass is a fresh seeded shuffle and a batch may straddle two passes. The result depends
    only on the arguments, which is what makes resuming exact.
    """
    if batch_size < 1 or index < 0 or not tasks:
        raise ValueError(f"need batch_size >= 1, index >= 0 and tasks (got {batch_size}, {index})")
    ordered = sorted(tasks, key=lambda t: (t.split, t.task_id))
    n = len(ordered)
    passes: dict[int, list[TaskInfo]] = {}
    batch = []
    for position in range(index * batch_size, (index + 1) * batch_size):
        epoch = position // n
        if epoch not in passes:
            passes[epoch] = list(ordered)
            random.Random(seed * 1_000_003 + epoch).shuffle(passes[epoch])
        batch.append(passes[epoch][position % n])
    return batch


def extra_batch(tasks: Sequence[TaskInfo], count: int, seed: int, number: int) -> list[TaskInfo]:
    """The `count` fresh games update `number` may use to replace degenerate groups."""
    return task_batch(tasks, count, seed + DYNAMIC_SEED_OFFSET, number - 1)


class GroupPlayer(Protocol):
    """`play(task, position, sampler, label)`: one group of `task`, as the group at `position`
    of the rollout call `label` would be played by `play_tasks` (same seeds)."""

    def __call__(
        self, task: TaskInfo, position: int, sampler: Sampler, label: str
    ) -> Awaitable[TrajectoryGroup]:
        """The group, scored by the reward."""
        ...


async def play_group(
    task: TaskInfo,
    position: int,
    sampler: Sampler,
    label: str,
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig,
    reward_fn: Reward,
) -> TrajectoryGroup:
    """One group of `task` (a `GroupPlayer` once the keyword arguments are bound): exactly the
    group `play_tasks(..., label)` plays at `position`, seeds included."""
    return await rollout_group(
        task,
        env_factory=env_factory,
        sampler=sampler,
        renderer=renderer,
        protocol=protocol,
        config=labelled_config(config, label),
        reward_fn=reward_fn,
        group_id=group_id_at(position, task),
    )


async def play_tasks(
    tasks: Sequence[TaskInfo],
    sampler: Sampler,
    version: int,
    label: str,
    on_group: GroupHook | None = None,
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig,
    reward_fn: Reward,
    max_concurrent: int | None = None,
    progress: bool = False,
) -> Rollout:
    """Play `tasks` with `sampler` (taken after `version` updates) through the rollout engine,
    timing each group and handing it to `on_group` as it finishes (a `RolloutFn` once the
    keyword arguments are bound; `max_concurrent` None or 0: every game at once). A base
    sampling seed is keyed by `label` (each rollout call
    of a run has its own), then per request by the rollout engine."""
    config = labelled_config(config, label)
    bar = None
    if progress:
        bar = progress_bar(total=len(tasks), desc=f"{label} rollout", unit="game", leave=False)
    started = time.perf_counter()
    seconds: list[float] = []

    def tick(group: TrajectoryGroup) -> None:
        seconds.append(time.perf_counter() - started)
        if bar is not None:
            bar.update(1)
        if on_group is not None:
            on_group(group)

    try:
        groups = await rollout_batch(
            tasks,
            env_factory=env_factory,
            sampler=sampler,
            renderer=renderer,
            protocol=protocol,
            config=config,
            reward_fn=reward_fn,
            max_concurrent_groups=max_concurrent or len(tasks),
            on_group=tick,
        )
        return Rollout(tuple(groups), version, tuple(seconds))
    finally:
        if bar is not None:
            bar.close()


async def play_with_player(
    tasks: Sequence[TaskInfo],
    sampler: Sampler,
    version: int,
    label: str,
    on_group: GroupHook | None = None,
    *,
    player: GroupPlayer,
    max_concurrent: int | None = None,
    progress: bool = False,
) -> Rollout:
    """Play `tasks` group by group with `player` (e.g. `agentrl.gateway.AgentPlayer`), at most
    `max_concurrent` at a time (None or 0: all), timing each group and handing it to
    `on_group` as it finishes: a `RolloutFn` once the keyword arguments are bound. Groups come
    back in task order."""
    limit = asyncio.Semaphore(max_concurrent or max(1, len(tasks)))
    bar = None
    if progress:
        bar = progress_bar(total=len(tasks), desc=f"{label} rollout", unit="game", leave=False)
    started = time.perf_counter()
    seconds: list[float] = []

    async def one(position: int, task: TaskInfo) -> TrajectoryGroup:
        async with limit:
            group = await player(task, position, sampler, label)
        seconds.append(time.perf_counter() - started)
        if bar is not None:
            bar.update(1)
        if on_group is not None:
            on_group(group)
        return group

    try:
        groups = await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks)))
        return Rollout(tuple(groups), version, tuple(seconds))
    finally:
        if bar is not None:
            bar.close()
