"""Where an update's groups come from: bounded off-policy pipelining and dynamic sampling.

With `k = max_steps_off_policy`:

- **k = 0** (the recipe): update `n` rolls out its games with the weights after update `n - 1`,
  then trains; nothing runs ahead.
- **k >= 1**: as soon as the groups of update `n` are in, the rollouts of updates `n + 1 ...
  n + k` that are not running yet are started, each with the newest sampler (the weights after
  update `n - 1`), so they run while update `n` trains. A rollout whose sampler was taken when
  `v` updates were complete and that is trained in update `n` is `n - 1 - v` updates *stale*;
  the schedule keeps that at most `k`, and a guard drops or resamples (same games, newest
  sampler; `StalePolicy`) any group older than `k`, counting it. The behaviour policy of the
  loss is the sampler's own logprobs, which every datum already carries; `LossConfig.tis_cap`
  adds a truncated importance weight for the gap.
- **dynamic sampling** (DAPO): with a budget `B > 0`, degenerate groups (all rewards equal: no
  learning signal) are replaced by groups of fresh games, drawn from a second seeded stream
  (`extra_batch`), until none is left or `B` extra games were played in this update. The
  replaced groups are neither trained nor written to `rollouts.jsonl`; they are counted.

Counters (`UpdateMetrics.sampling`): `offpolicy/staleness` (updates), `offpolicy/stale_groups`,
`offpolicy/dropped_groups`, `offpolicy/resampled_groups`, `dynamic/extra_games`,
`dynamic/replaced_groups`, `dynamic/degenerate_left`, and the stragglers of the update's own
rollout: `stragglers/group_seconds_p50` and `stragglers/group_seconds_max` (seconds from the
rollout's start until each game's group, i.e. its slowest branch, finished).

Streaming (`--stream-groups`, k = 0 only): `take(..., on_group=hook)` calls `hook` with every
group of the update's rollout, and of the dynamic-sampling and resample rollouts, as soon as
it finishes, so the trainer can start training it (`agentrl.training.streaming`).

Resume: for k = 0 an update depends only on the checkpoint and the seeded game streams, so a
resumed run plays what an uninterrupted one would. For k >= 1 the rollouts that were running
ahead are lost with the process; after a resume update `n` is rolled out afresh with the
weights after update `n - 1` (staleness 0 at first): the same games, sampled by newer weights.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from agentrl.algo.advantages import AdvantageEstimator
from agentrl.algo.rewards import RewardFn
from agentrl.backends.base import Sampler
from agentrl.chat import ChatRenderer
from agentrl.config import StalePolicy, TrainConfig
from agentrl.core.env import EnvGroupFactory
from agentrl.core.seeds import derive_seed
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.tools import ToolProtocol

__all__ = [
    "GroupHook",
    "GroupSource",
    "Rollout",
    "RolloutFn",
    "UpdateGroups",
    "extra_batch",
    "group_source_for",
    "play_tasks",
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


@dataclass(frozen=True)
class UpdateGroups:
    """The groups an update trains on, and the counters of how they were obtained."""

    groups: tuple[TrajectoryGroup, ...]
    counters: Mapping[str, float] = field(default_factory=dict)


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
    reward_fn: RewardFn,
    max_concurrent: int,
    progress: bool = False,
) -> Rollout:
    """Play `tasks` with `sampler` (taken after `version` updates) through the rollout engine,
    timing each group and handing it to `on_group` as it finishes (a `RolloutFn` once the
    keyword arguments are bound). A base sampling seed is keyed by `label` (each rollout call
    of a run has its own), then per request by the rollout engine."""
    if config.sampling.seed is not None:
        keyed = derive_seed(config.sampling.seed, label)
        config = replace(config, sampling=replace(config.sampling, seed=keyed))
    bar = None
    if progress:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]

        bar = tqdm(total=len(tasks), desc=f"{label} rollout", unit="game", leave=False)
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
            max_concurrent_groups=max_concurrent,
            on_group=tick,
        )
        return Rollout(tuple(groups), version, tuple(seconds))
    finally:
        if bar is not None:
            bar.close()


class GroupSource:
    """Hands each update its groups, keeping up to `k` later updates' rollouts in flight."""

    def __init__(
        self,
        *,
        rollout: RolloutFn,
        sampler: Callable[[], Awaitable[Sampler]],
        games: Callable[[int], list[TaskInfo]],
        extra_games: Callable[[int, int], list[TaskInfo]],
        estimator: AdvantageEstimator,
        max_steps_off_policy: int = 0,
        resample_stale: bool = False,
        dynamic_budget: int = 0,
        last_update: int | None = None,
    ) -> None:
        if max_steps_off_policy < 0 or dynamic_budget < 0:
            raise ValueError("max_steps_off_policy and dynamic_budget must be >= 0")
        self._rollout = rollout
        self._sampler = sampler
        self._games = games
        self._extra_games = extra_games
        self._estimator = estimator
        self.k = max_steps_off_policy
        self.resample_stale = resample_stale
        self.dynamic_budget = dynamic_budget
        self.last_update = last_update
        self._ahead: dict[int, asyncio.Task[Rollout]] = {}

    async def _start(
        self, number: int, version: int, on_group: GroupHook | None = None
    ) -> asyncio.Task[Rollout]:
        sampler = await self._sampler()  # taken now: before this update's training starts
        work = self._call(self._games(number), sampler, version, f"update {number}", on_group)
        return asyncio.ensure_future(work)

    def _call(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: GroupHook | None,
    ) -> Awaitable[Rollout]:
        if on_group is None:  # a rollout function written before streaming takes no hook
            return self._rollout(tasks, sampler, version, label)
        return self._rollout(tasks, sampler, version, label, on_group=on_group)

    async def take(
        self, number: int, version: int, on_group: GroupHook | None = None
    ) -> UpdateGroups:
        """The groups of update `number`; `version` = updates completed so far. `on_group`
        (k = 0 only) sees every group this call plays as soon as it finishes."""
        if on_group is not None and self.k:
            raise ValueError(
                "streaming groups (on_group) needs max_steps_off_policy = 0: with k >= 1 the "
                "rollout of an update was started before the previous update's step"
            )
        task = self._ahead.pop(number, None) or await self._start(number, version, on_group)
        rolled = await task
        for ahead in range(number + 1, number + self.k + 1):
            if self.last_update is not None and ahead > self.last_update:
                break
            if ahead not in self._ahead:
                self._ahead[ahead] = await self._start(ahead, version)
        counters: dict[str, float] = {}
        groups = list(rolled.groups)
        staleness = version - rolled.version
        if self.k:
            counters["offpolicy/staleness"] = float(staleness)
        if staleness > self.k:
            counters["offpolicy/stale_groups"] = float(len(groups))
            if self.resample_stale:
                tasks = [g.task for g in groups]
                fresh = await self._play(tasks, version, number, "resample", on_group)
                groups = list(fresh.groups)
                counters["offpolicy/resampled_groups"] = float(len(groups))
            else:
                counters["offpolicy/dropped_groups"] = float(len(groups))
                groups = []
        if rolled.group_seconds:
            seconds = np.asarray(rolled.group_seconds, dtype=np.float64)
            counters["stragglers/group_seconds_p50"] = float(np.median(seconds))
            counters["stragglers/group_seconds_max"] = float(seconds.max())
        if self.dynamic_budget:
            groups = await self._replace_degenerate(groups, number, version, counters, on_group)
        return UpdateGroups(tuple(groups), counters)

    async def _play(
        self,
        tasks: Sequence[TaskInfo],
        version: int,
        number: int,
        label: str,
        on_group: GroupHook | None = None,
    ) -> Rollout:
        sampler = await self._sampler()
        return await self._call(tasks, sampler, version, f"update {number} {label}", on_group)

    async def _replace_degenerate(
        self,
        groups: list[TrajectoryGroup],
        number: int,
        version: int,
        counters: dict[str, float],
        on_group: GroupHook | None = None,
    ) -> list[TrajectoryGroup]:
        flags = [g.degenerate for g in self._estimator.estimate(groups).groups] if groups else []
        waiting = [i for i, flag in enumerate(flags) if flag]
        extra = self._extra_games(number, self.dynamic_budget)
        used = replaced = 0
        while waiting and used < self.dynamic_budget:
            batch = extra[used : used + min(len(waiting), self.dynamic_budget - used)]
            used += len(batch)
            label = f"dynamic sampling {used - len(batch)}"  # unique: the batch's offset
            played = await self._play(batch, version, number, label, on_group)
            for group in played.groups:
                (result,) = self._estimator.estimate([group]).groups
                if waiting and not result.degenerate:
                    groups[waiting.pop(0)] = group
                    replaced += 1
        counters["dynamic/extra_games"] = float(used)
        counters["dynamic/replaced_groups"] = float(replaced)
        counters["dynamic/degenerate_left"] = float(len(waiting))
        return groups

    async def close(self) -> None:
        """Cancel the rollouts running ahead (their groups are never trained)."""
        ahead, self._ahead = list(self._ahead.values()), {}
        for task in ahead:
            task.cancel()
        await asyncio.gather(*ahead, return_exceptions=True)  # cancelled or failed: dropped


def group_source_for(
    config: TrainConfig,
    tasks: Sequence[TaskInfo],
    rollout: RolloutFn,
    sampler: Callable[[], Awaitable[Sampler]],
    estimator: AdvantageEstimator,
) -> GroupSource:
    """The group source of a training run: the seeded game streams of `tasks` and the config's
    off-policy, stale-group and dynamic-sampling settings."""
    return GroupSource(
        rollout=rollout,
        sampler=sampler,
        games=lambda n: task_batch(tasks, config.games_per_batch, config.seed, n - 1),
        extra_games=lambda n, count: extra_batch(tasks, count, config.seed, n),
        estimator=estimator,
        max_steps_off_policy=config.max_steps_off_policy,
        resample_stale=config.stale_groups is StalePolicy.RESAMPLE,
        dynamic_budget=config.dynamic_sampling_budget,
        last_update=config.max_steps,
    )
