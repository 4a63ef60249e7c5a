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

Scoring, once: the source hands out *scored* groups (`ScoredGroup`: the group, its advantages
and degenerate flag, `agentrl.algo.advantages.score_groups`). With a group-local estimator each
group is estimated once, alone, when it is first seen (as it finishes when streaming, else when
its rollout returns); dynamic sampling's degenerate check, streaming and whole-batch training
all reuse that answer. An estimator that is not group-local is run once on the update's final
batch; with dynamic sampling it first answers the degenerate check (on the batch as rolled out,
then on each candidate replacement alone), and the final batch is estimated anew only if a
group was replaced (its groups' advantages may depend on the others).

Streaming (`--stream-groups`, k = 0 only, group-local estimators only): `take(...,
on_group=hook)` calls `hook` with every scored group of the update's rollout, and of the
dynamic-sampling and resample rollouts, as soon as it finishes, so the trainer can start
training it (`agentrl.training.streaming`).

Resume: for k = 0 an update depends only on the checkpoint and the seeded game streams, so a
resumed run plays what an uninterrupted one would. For k >= 1 the rollouts that were running
ahead are lost with the process; after a resume update `n` is rolled out afresh with the
weights after update `n - 1` (staleness 0 at first): the same games, sampled by newer weights.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from agentrl.algo.advantages import (
    AdvantageEstimator,
    Advantages,
    ScoredGroup,
    advantages_of,
    is_group_local,
    score_groups,
)
from agentrl.backends.base import Sampler
from agentrl.backends.versions import VersionedSampler
from agentrl.config import StalePolicy, TrainConfig
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.training.play import (
    GroupHook,
    Rollout,
    RolloutFn,
    extra_batch,
    play_tasks,
    task_batch,
)

__all__ = [
    "GroupHook",
    "GroupSource",
    "Rollout",
    "RolloutFn",
    "ScoredHook",
    "UpdateGroups",
    "UpdateSource",
    "extra_batch",
    "group_source_for",
    "play_tasks",
    "task_batch",
    "update_games",
]

ScoredHook = Callable[[ScoredGroup], None]
"""Called with each scored group as soon as its rollout finishes (streaming)."""


@dataclass(frozen=True)
class UpdateGroups:
    """The scored groups an update trains on, and the counters of how they were obtained."""

    scored: tuple[ScoredGroup, ...]
    counters: Mapping[str, float] = field(default_factory=dict)
    advantage_seconds: float = 0.0
    """Seconds the source spent estimating advantages for this update."""

    @property
    def groups(self) -> tuple[TrajectoryGroup, ...]:
        """The groups, in training order."""
        return tuple(s.group for s in self.scored)

    @property
    def advantages(self) -> Advantages:
        """Their advantages, aligned with `groups`."""
        return advantages_of(self.scored)


class UpdateSource(Protocol):
    """Where a trainer's updates get their scored groups: `GroupSource` (synchronous, k-step
    pipelining) or `agentrl.training.asynchronous.AsyncGroupSource` (partial rollouts)."""

    async def take(
        self, number: int, version: int, on_group: ScoredHook | None = None
    ) -> UpdateGroups:
        """The scored groups of update `number`; `version` = updates completed so far."""
        ...

    async def close(self) -> None:
        """Cancel the rollouts still running (their groups are never trained)."""
        ...


class GroupSource:
    """Hands each update its scored groups, keeping up to `k` later updates' rollouts in
    flight (module docstring)."""

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
        self._local = is_group_local(estimator)
        self.k = max_steps_off_policy
        self.resample_stale = resample_stale
        self.dynamic_budget = dynamic_budget
        self.last_update = last_update
        self._ahead: dict[int, asyncio.Task[Rollout]] = {}
        self._known: dict[int, ScoredGroup] = {}
        """This update's scored groups by `id(group)` (group-local estimators)."""
        self._seconds = 0.0

    def _estimate(self, groups: Sequence[TrajectoryGroup]) -> tuple[ScoredGroup, ...]:
        clock = time.perf_counter()
        scored = score_groups(self._estimator, groups)
        self._seconds += time.perf_counter() - clock
        return scored

    def _score(self, group: TrajectoryGroup) -> ScoredGroup:
        """A group-local estimate of `group`, made once per update and then reused."""
        known = self._known.get(id(group))
        if known is None or known.group is not group:
            (known,) = self._estimate([group])
            self._known[id(group)] = known
        return known

    def _hook(self, on_scored: ScoredHook | None) -> GroupHook | None:
        if on_scored is None:
            return None
        return lambda group: on_scored(self._score(group))

    async def _start(
        self, number: int, version: int, on_group: ScoredHook | None = None
    ) -> asyncio.Task[Rollout]:
        sampler = await self._sampler()  # taken now: before this update's training starts
        versioned = VersionedSampler(sampler, version)
        work = self._call(self._games(number), versioned, version, f"update {number}", on_group)
        return asyncio.ensure_future(work)

    def _call(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: ScoredHook | None,
    ) -> Awaitable[Rollout]:
        hook = self._hook(on_group)
        if hook is None:  # a rollout function written before streaming takes no hook
            return self._rollout(tasks, sampler, version, label)
        return self._rollout(tasks, sampler, version, label, on_group=hook)

    async def take(
        self, number: int, version: int, on_group: ScoredHook | None = None
    ) -> UpdateGroups:
        """The scored groups of update `number`; `version` = updates completed so far.
        `on_group` (k = 0, group-local estimators only) sees every group this call plays,
        scored, as soon as it finishes."""
        if on_group is not None and self.k:
            raise ValueError(
                "streaming groups (on_group) needs max_steps_off_policy = 0: with k >= 1 the "
                "rollout of an update was started before the previous update's step"
            )
        if on_group is not None and not self._local:
            raise ValueError(
                f"streaming groups (on_group) scores each group alone, but "
                f"{type(self._estimator).__name__} does not declare group_local = True"
            )
        self._known, self._seconds = {}, 0.0
        try:
            return await self._take(number, version, on_group)
        finally:
            self._known = {}

    async def _take(self, number: int, version: int, on_group: ScoredHook | None) -> UpdateGroups:
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
        batch: tuple[ScoredGroup, ...] | None = None
        if self.dynamic_budget:
            groups, batch = await self._replace_degenerate(
                groups, number, version, counters, on_group
            )
        if batch is None:
            batch = self._score_batch(groups)
        return UpdateGroups(batch, counters, self._seconds)

    def _score_batch(self, groups: Sequence[TrajectoryGroup]) -> tuple[ScoredGroup, ...]:
        """The batch's scores: each group's own (group-local), or one estimate of the batch."""
        if self._local:
            return tuple(self._score(g) for g in groups)
        return self._estimate(groups)

    async def _play(
        self,
        tasks: Sequence[TaskInfo],
        version: int,
        number: int,
        label: str,
        on_group: ScoredHook | None = None,
    ) -> Rollout:
        sampler = VersionedSampler(await self._sampler(), version)
        return await self._call(tasks, sampler, version, f"update {number} {label}", on_group)

    async def _replace_degenerate(
        self,
        groups: list[TrajectoryGroup],
        number: int,
        version: int,
        counters: dict[str, float],
        on_group: ScoredHook | None = None,
    ) -> tuple[list[TrajectoryGroup], tuple[ScoredGroup, ...] | None]:
        """Degenerate groups replaced by fresh games; with the final batch's scores when they
        are already known (None: the batch must be scored as a whole)."""
        batch = self._score_batch(groups)
        waiting = [i for i, scored in enumerate(batch) if scored.degenerate]
        extra = self._extra_games(number, self.dynamic_budget)
        used = replaced = 0
        while waiting and used < self.dynamic_budget:
            chunk = extra[used : used + min(len(waiting), self.dynamic_budget - used)]
            used += len(chunk)
            label = f"dynamic sampling {used - len(chunk)}"  # unique: the chunk's offset
            played = await self._play(chunk, version, number, label, on_group)
            for group in played.groups:
                (alone,) = (self._score(group),) if self._local else self._estimate([group])
                if waiting and not alone.degenerate:
                    groups[waiting.pop(0)] = group
                    replaced += 1
        counters["dynamic/extra_games"] = float(used)
        counters["dynamic/replaced_groups"] = float(replaced)
        counters["dynamic/degenerate_left"] = float(len(waiting))
        if self._local or not replaced:
            return groups, self._score_batch(groups) if self._local else batch
        return groups, None

    async def close(self) -> None:
        """Cancel the rollouts running ahead (their groups are never trained)."""
        ahead, self._ahead = list(self._ahead.values()), {}
        for task in ahead:
            task.cancel()
        await asyncio.gather(*ahead, return_exceptions=True)  # cancelled or failed: dropped


def update_games(config: TrainConfig, tasks: Sequence[TaskInfo]) -> Callable[[int], list[TaskInfo]]:
    """The run's seeded game stream: update `n` plays batch `n - 1` (`task_batch`), whichever
    group source plays it."""
    return lambda n: task_batch(tasks, config.games_per_batch, config.seed, n - 1)


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
        games=update_games(config, tasks),
        extra_games=lambda n, count: extra_batch(tasks, count, config.seed, n),
        estimator=estimator,
        max_steps_off_policy=config.max_steps_off_policy,
        resample_stale=config.stale_groups is StalePolicy.RESAMPLE,
        dynamic_budget=config.dynamic_sampling_budget,
        last_update=config.max_steps,
    )
