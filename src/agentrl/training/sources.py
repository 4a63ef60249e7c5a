"""The group source a training run's config asks for: synchronous or k-step pipelined
(`agentrl.training.pipeline.GroupSource`), or asynchronous with partial rollouts
(`agentrl.training.asynchronous.AsyncGroupSource`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from agentrl.algo.advantages import AdvantageEstimator
from agentrl.backends.base import Sampler
from agentrl.config import StalePolicy, TrainConfig
from agentrl.core.types import TaskInfo
from agentrl.training.asynchronous import AsyncGroupSource
from agentrl.training.pipeline import UpdateSource, group_source_for, update_games
from agentrl.training.play import GroupPlayer, RolloutFn

__all__ = ["update_source_for"]


def update_source_for(
    config: TrainConfig,
    tasks: Sequence[TaskInfo],
    *,
    rollout: RolloutFn,
    player: GroupPlayer,
    sampler: Callable[[], Awaitable[Sampler]],
    estimator: AdvantageEstimator,
) -> UpdateSource:
    """`AsyncGroupSource` over `player` with `config.async_rollouts`, else `GroupSource` over
    `rollout` (`group_source_for`); both play the run's seeded game stream."""
    if not config.async_rollouts:
        return group_source_for(config, tasks, rollout, sampler, estimator)
    return AsyncGroupSource(
        play=player,
        sampler=sampler,
        games=update_games(config, tasks),
        groups_per_update=config.games_per_batch,
        estimator=estimator,
        max_staleness=config.max_staleness,
        max_concurrent=config.max_concurrent_games,
        resample_stale=config.stale_groups is StalePolicy.RESAMPLE,
        last_update=config.max_steps,
    )
