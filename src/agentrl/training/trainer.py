"""The training loop: rollouts, rewards, advantages, datums, one PPO step per update.

Each update `n` (1-based):

1. a sampler for the latest weights (`TrainingBackend.sampler()`);
2. batch `n - 1` of the seeded game stream (`task_batch`: a pure function of the games, the
   seed and the index, so a resumed run plays exactly the games an uninterrupted one would);
3. one group of `group_size` trajectories per game through the rollout engine, scored by the
   reward function;
4. advantages by the configured estimator, once per group, by the group source (which hands
   the trainer *scored* groups); trajectories whose advantages are all zero are skipped; one
   datum per remaining trajectory (`scored_datums`);
5. one `forward_backward` (PPO, clip 0.8 / 1.2 by default) and one `optim_step` (skipped when
   no datum is left, e.g. every group degenerate), or with `optim_substeps = m` one of each on m
   consecutive parts of whole trajectories (`agentrl.training.substeps`); with `stream_groups`,
   steps 4-5 run group by group while the rollout goes on (`agentrl.training.streaming`), still
   ending in ONE `optim_step`;
6. metrics (reward, success overall and per task type, invalid actions, env steps, tokens,
   truncation, degenerate groups, loss, seconds per phase) to the sinks; the trajectories (as
   text) to `rollouts.jsonl`.

Checkpoints (training state + sampler weights) are saved every `save_every` updates and at the
end, each described by `<run_dir>/checkpoints/update-NNNN.json`. `resume=True` loads the latest
one and continues with the next update (`agentrl.training.resume`: damaged checkpoints, records of
updates that were never checkpointed). Cancellation (what SIGINT / SIGTERM do to the CLI) lets
a started optimizer step or save finish, saves a checkpoint of the last completed update, and
re-raises. The run folder is locked while `run` goes (`agentrl.store.lock`).

The trainer talks to the model only through `TrainingBackend` / `Sampler` and to the world only
through an `EnvGroupFactory`. Where an update's groups come from (off-policy pipelining with
`max_steps_off_policy = k`, dynamic sampling, straggler timings) is `agentrl.training.pipeline`,
or with `async_rollouts` `agentrl.training.asynchronous` (partial rollouts under a staleness
bound): control runs one way, the trainer asks its source for scored groups and the source
plays them with `play_tasks` / `play_group` (bound to the trainer's env factory, renderer,
protocol, rollout config and reward), never calling back into the trainer. The env factory
belongs to whoever built it: the trainer never closes it. Besides RL: `distillation` (a
teacher's per-token signal), `rejection` (cross entropy on kept trajectories) and, with it,
`behaviour` (the games played by another model's sampler: imitation of its winners).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from agentrl.algo.advantages import AdvantageEstimator, Advantages, ScoredGroup
from agentrl.algo.datums import Datum, scored_trajectory_datums
from agentrl.algo.metrics import UpdateMetrics, update_metrics
from agentrl.algo.rewards import Reward
from agentrl.backends.base import (
    ForwardBackwardResult,
    LossConfig,
    LossName,
    Sampler,
    TrainingBackend,
)
from agentrl.chat import ChatRenderer
from agentrl.config import Objective, TrainConfig
from agentrl.core.env import EnvGroupFactory
from agentrl.core.progress import progress_bar
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.reporting.sinks import MetricSink
from agentrl.store.lock import OutputLock
from agentrl.store.records import TrajectoryRecord, append_records
from agentrl.tools import ToolProtocol
from agentrl.training.build import rollout_config_for, train_sinks
from agentrl.training.checkpoints import (
    ROLLOUTS_FILE,
    CheckpointInfo,
    checkpoint_info,
    commit_checkpoint,
)
from agentrl.training.distillation import Distillation, distill_batch
from agentrl.training.pipeline import (
    GroupHook,
    Rollout,
    RolloutFn,
    UpdateSource,
    play_tasks,
    task_batch,
)
from agentrl.training.play import GroupPlayer, play_group, play_with_player
from agentrl.training.preflight import check_token_budget
from agentrl.training.rejection import RejectionSampling, rejection_batch
from agentrl.training.resume import ORDER_FIELDS, run_state, start_run
from agentrl.training.sources import update_source_for
from agentrl.training.streaming import (
    GroupStreamer,
    check_streaming,
    finish_streamed,
    open_streamer,
)
from agentrl.training.substeps import run_substeps

__all__ = ["ORDER_FIELDS", "TrainResult", "Trainer", "task_batch"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    """What `Trainer.run` did."""

    last_update: int
    """The last completed update (the update counter)."""
    checkpoints: tuple[CheckpointInfo, ...]
    """Checkpoints saved by this call, in order."""
    metrics: tuple[UpdateMetrics, ...]
    """Metrics of the updates run by this call."""


@dataclass(frozen=True)
class _Trained:
    """What the training half of an update did."""

    result: ForwardBackwardResult | None
    scalars: Mapping[str, float]
    """The optimizer step's metrics."""
    timings: Mapping[str, float]
    advantages: Advantages | None = None


class Trainer:
    """Runs the update loop of one training run (see the module docstring)."""

    def __init__(
        self,
        *,
        config: TrainConfig,
        backend: TrainingBackend,
        env_factory: EnvGroupFactory | None,
        tasks: Sequence[TaskInfo],
        renderer: ChatRenderer,
        protocol: ToolProtocol | None,
        estimator: AdvantageEstimator | None = None,
        reward_fn: Reward | None = None,
        sinks: MetricSink | None = None,
        progress: bool = True,
        player: GroupPlayer | None = None,
        distillation: Distillation | None = None,
        rejection: RejectionSampling | None = None,
        behaviour: Callable[[], Awaitable[Sampler]] | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("Trainer needs at least one training task")
        if player is None and (env_factory is None or protocol is None):
            raise ValueError(
                "Trainer needs env_factory and protocol (the rollout engine plays the games), "
                "or a player (e.g. agentrl.gateway.AgentPlayer: an agent plays them)"
            )
        self.config = config
        self.backend = backend
        self.env_factory = env_factory
        self.tasks = list(tasks)
        self.renderer = renderer
        self.protocol = protocol
        self.reward_fn = reward_fn or config.reward_fn()
        self.estimator = estimator or config.advantage_estimator(self.reward_fn)
        self.run_dir = Path(config.run_dir)
        self._sinks = sinks
        self._own_sinks = sinks is None
        self.progress = progress
        # `config.seed` is the base of keyed per-request seeds: each rollout call derives its
        # own from its label (`play_tasks`), each request from its group, branch and turn.
        self.rollout = rollout_config_for(config, config.group_size, config.sampling_params())
        self.completed = 0
        """The last completed update."""
        self.last_saved: CheckpointInfo | None = None
        self._pending: UpdateMetrics | None = None
        self.player = player
        """Who plays the games when not the rollout engine (e.g. an `AgentPlayer`)."""
        self.play: RolloutFn
        """`play_tasks` bound to this run's env, renderer, protocol, budgets and reward (or
        `play_with_player` over `player`)."""
        self.play_group: GroupPlayer
        """`play_group` bound likewise: one game's group (asynchronous rollouts)."""
        if player is not None:
            self.play_group = player
            self.play = partial(
                play_with_player,
                player=player,
                max_concurrent=config.max_concurrent_games,
                progress=progress,
            )
        else:
            assert env_factory is not None and protocol is not None
            self.play = partial(
                play_tasks,
                env_factory=env_factory,
                renderer=renderer,
                protocol=protocol,
                config=self.rollout,
                reward_fn=self.reward_fn,
                max_concurrent=config.max_concurrent_games,
                progress=progress,
            )
            self.play_group = partial(
                play_group,
                env_factory=env_factory,
                renderer=renderer,
                protocol=protocol,
                config=self.rollout,
                reward_fn=self.reward_fn,
            )
        self.source: UpdateSource = update_source_for(
            config,
            self.tasks,
            rollout=self.play,
            player=self.play_group,
            sampler=self.backend.sampler if behaviour is None else behaviour,
            estimator=self.estimator,
        )
        self._uncommitted: CheckpointInfo | None = None
        if rejection is None and config.objective is Objective.RFT:
            rejection = RejectionSampling()  # the won trajectories
        if distillation is None and config.objective in (Objective.OPD, Objective.OPSD):
            raise ValueError(
                f"config.objective {config.objective.value} needs Trainer(distillation="
                "Distillation(teacher)); `agentrl train` builds it from --teacher-model (opd) "
                "or the env's privileged context (opsd)"
            )
        self.distillation = distillation
        """On-policy distillation's teacher and weights (None: RL)."""
        self.rejection = rejection
        """Rejection-sampling fine-tuning's filter (None: RL; `config.objective` rft: the won
        trajectories)."""
        if distillation is not None and rejection is not None:
            raise ValueError("a Trainer distils (distillation) or filters (rejection), not both")
        if behaviour is not None and (rejection is None or player is not None):
            raise ValueError(
                "Trainer(behaviour=...) plays the games with another model's sampler, which only "
                "imitation trains on: pass rejection=RejectionSampling(...) (cross entropy on the "
                "kept trajectories) and no player; RL and distillation train on the student's "
                "own samples"
            )
        self.behaviour = behaviour
        """Who samples the rollouts when not the backend's live weights (imitation of another
        model's kept trajectories)."""
        if config.stream_groups:
            if distillation is not None or rejection is not None:
                raise ValueError(
                    "stream_groups trains group by group; on-policy distillation and "
                    "rejection sampling use the whole batch: turn stream_groups off"
                )
            check_streaming(backend, self.estimator, config.loss, config.loss_config())

    # -- one update ------------------------------------------------------------------------

    async def rollout_games(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: GroupHook | None = None,
    ) -> Rollout:
        """Play `tasks` with `sampler` (taken after `version` updates), timing each group and
        handing it to `on_group` as it finishes (`self.play`, i.e. `play_tasks`)."""
        return await self.play(tasks, sampler, version, label, on_group)

    async def _step(
        self, result: ForwardBackwardResult, timings: dict[str, float], number: int
    ) -> _Trained:
        clock = time.perf_counter()
        optim = dict(await self.backend.optim_step(self.config.adam_params(number)))
        timings["optim_step"] = time.perf_counter() - clock
        return _Trained(result, optim, timings)

    async def _train(self, scored: Sequence[ScoredGroup], seconds: float, number: int) -> _Trained:
        """Datums of the scored groups, one forward_backward and one optim_step (none without
        datums) for update `number`; `seconds`: the source's time estimating advantages."""
        config = self.config
        clock = time.perf_counter()
        advantages = Advantages(tuple(s.advantages for s in scored))
        if self.rejection is not None:
            return await self._train_kept(scored, seconds, advantages, number)
        every_token = config.loss_config().needs_every_token or self.distillation is not None
        pairs = scored_trajectory_datums(scored, keep_zero_advantage=every_token)
        datums = [d for _, d in pairs]
        timings = {"advantages": seconds + time.perf_counter() - clock}
        if not datums:
            return _Trained(None, {}, timings, advantages)
        teacher: dict[str, float] = {}
        loss, labelled = config.loss, False
        if self.distillation is not None:
            clock = time.perf_counter()
            batch = await distill_batch(datums, self.distillation, [t for t, _ in pairs])
            datums = batch.datums
            teacher = batch.metrics
            if batch.cross_entropy:  # the teacher's labels (its KL penalty still applies)
                loss, labelled = LossName.CROSS_ENTROPY, True
            timings["teacher"] = time.perf_counter() - clock
        trained = await self._fit(datums, loss, config.loss_config(), timings, number)
        if labelled and trained.result is not None:
            # the targets are the teacher's labels, the datums' logprobs the sampled tokens':
            # no sampler-vs-trainer comparison to report
            trained = replace(trained, result=replace(trained.result, mismatch=None))
        return replace(trained, scalars={**trained.scalars, **teacher}, advantages=advantages)

    async def _fit(
        self,
        datums: Sequence[Datum],
        loss: LossName,
        loss_config: LossConfig,
        timings: dict[str, float],
        number: int,
    ) -> _Trained:
        """`forward_backward` and `optim_step` on `datums`: once, or on each of
        `config.optim_substeps` parts of whole trajectories (`agentrl.training.substeps`), at
        update `number`'s scheduled learning rate."""
        adam = self.config.adam_params(number)
        result, optim, fb_seconds, optim_seconds = await run_substeps(
            datums,
            self.config.optim_substeps,
            lambda part: self.backend.forward_backward(part, loss, loss_config),
            lambda: self.backend.optim_step(adam),
        )
        timings["forward_backward"] = fb_seconds
        timings["optim_step"] = optim_seconds
        return _Trained(result, optim, timings)

    async def _train_kept(
        self, scored: Sequence[ScoredGroup], seconds: float, advantages: Advantages, number: int
    ) -> _Trained:
        """Rejection sampling: cross entropy on the kept trajectories (no step without any)."""
        assert self.rejection is not None
        clock = time.perf_counter()
        batch = rejection_batch([s.group for s in scored], self.rejection)
        timings = {"advantages": seconds + time.perf_counter() - clock}
        if not batch.datums:
            return _Trained(None, batch.scalars(), timings, advantages)
        trained = await self._fit(
            batch.datums, LossName.CROSS_ENTROPY, LossConfig(), timings, number
        )
        return replace(
            trained, scalars={**trained.scalars, **batch.scalars()}, advantages=advantages
        )

    async def _train_streamed(
        self,
        streamer: GroupStreamer,
        scored: Sequence[ScoredGroup],
        seconds: float,
        number: int,
    ) -> _Trained:
        """The rest of a streamed batch, the stream's finish, one optim_step."""
        batch = await finish_streamed(streamer, scored)
        timings = batch.timings()
        timings["advantages"] += seconds
        if batch.result is None:
            return _Trained(None, {}, timings, batch.advantages)
        trained = await self._step(batch.result, timings, number)
        return replace(trained, advantages=batch.advantages)

    def _streamer(self) -> GroupStreamer | None:
        config = self.config
        if not config.stream_groups:
            return None
        return open_streamer(self.backend, self.estimator, config.loss, config.loss_config())

    async def update(self, number: int) -> UpdateMetrics:
        """Run update `number`; a cancellation during its optimizer step lets the step finish
        (with `stream_groups`: from the end of the rollout on)."""
        started = clock = time.perf_counter()
        streamer = self._streamer()
        hook = None if streamer is None else streamer.on_group
        try:
            taken = await self.source.take(number, self.completed, on_group=hook)
        except BaseException:
            if streamer is not None:
                await streamer.abort()
            raise
        groups = list(taken.groups)
        rollout_seconds, seconds = time.perf_counter() - clock, taken.advantage_seconds
        trains = self._train if streamer is None else partial(self._train_streamed, streamer)
        work = trains(taken.scored, seconds, number)
        step = asyncio.ensure_future(work)
        cancelled = False
        try:
            trained = await asyncio.shield(step)
        except asyncio.CancelledError:
            trained = await step  # the weights change now: count the update
            cancelled = True
        result = trained.result
        scalars = dict(trained.scalars)
        if result is not None:
            scalars.update({f"fb/{k}": v for k, v in result.metrics.items()})
        timings = {"rollout": rollout_seconds, **trained.timings}
        timings["total"] = time.perf_counter() - started
        metrics = update_metrics(
            number,
            groups,
            trained.advantages,
            loss=None if result is None else result.loss,
            trained_tokens=0 if result is None else result.num_tokens,
            backend=scalars,
            timings=timings,
            mismatch=None if result is None else result.mismatch,
            sampling=taken.counters,
        )
        self._finish(number, groups, metrics)
        if cancelled:
            raise asyncio.CancelledError
        return metrics

    def _finish(
        self, number: int, groups: Sequence[TrajectoryGroup], metrics: UpdateMetrics
    ) -> None:
        self.completed = number
        if self.config.save_rollouts:
            extra: Mapping[str, int] = {"update": number}
            records = (
                TrajectoryRecord.from_trajectory(t, extra=extra)
                for g in groups
                for t in g.trajectories
            )
            append_records(self.run_dir / ROLLOUTS_FILE, records)
        self._pending = metrics

    # -- checkpoints -----------------------------------------------------------------------

    async def save(self, number: int) -> CheckpointInfo:
        """Save a checkpoint of the current weights as update `number`."""
        return self._commit(await self._save_weights(number))

    async def _save_weights(self, number: int) -> CheckpointInfo:
        """The backend's save of update `number`, not yet recorded (see `_commit`).

        A cancellation lets a started save finish (it is then committed by the interrupt
        handler), so a second save of the same name never overlaps it.
        """
        name = f"update-{number:04d}"
        saving = asyncio.ensure_future(self.backend.save(name))
        try:
            ref = await asyncio.shield(saving)
        except asyncio.CancelledError:
            ref = await saving
            self._uncommitted = checkpoint_info(self.config, number, name, ref)
            raise
        return checkpoint_info(self.config, number, name, ref)

    def _commit(self, info: CheckpointInfo) -> CheckpointInfo:
        """Write the checkpoint record: from now on `--resume` continues from it."""
        commit_checkpoint(self.run_dir, info)
        self.last_saved = info
        self._uncommitted = None
        return info

    async def _start(self) -> int:
        """Check the run folder, resume if asked; return the first update to run."""
        state = run_state(self.config, self.tasks, self.renderer.record.as_json())
        latest = await start_run(self.backend, self.config, state)
        if latest is None:
            return 1
        self.completed = latest.update
        self.last_saved = latest
        log.info("resumed from %s (update %d)", latest.name, latest.update)
        return latest.update + 1

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> TrainResult:
        """Run updates until `max_steps` (continuing a previous run if `resume`).

        The run folder is locked for the whole call: a second trainer on it is refused with
        `OutputInUseError` naming the holder's pid.
        """
        with OutputLock(self.run_dir, what="run folder", folder=True):
            return await self._run()

    async def _run(self) -> TrainResult:
        config = self.config
        if self.env_factory is not None and self.protocol is not None:
            await check_token_budget(  # before anything is written to the run folder
                self.tasks[0],
                env_factory=self.env_factory,
                renderer=self.renderer,
                protocol=self.protocol,
                config=self.rollout,
            )
        first = await self._start()
        if self._sinks is None:
            self._sinks = train_sinks(config, console=self.progress)
        saved: list[CheckpointInfo] = []
        done: list[UpdateMetrics] = []
        bar = None
        if self.progress:
            bar = progress_bar(
                total=config.max_steps, initial=first - 1, desc="training", unit="update"
            )
        try:
            for number in range(first, config.max_steps + 1):
                metrics = await self.update(number)
                info: CheckpointInfo | None = None
                if number % config.save_every == 0 or number == config.max_steps:
                    clock = time.perf_counter()
                    info = await self._save_weights(number)
                    timings = {**metrics.timings, "save": time.perf_counter() - clock}
                    metrics = replace(metrics, timings=timings)
                # Metrics first, then the record: a crash in between replays this update on
                # resume (its records are dropped), never leaves a checkpoint without metrics.
                self._sinks.log("train", number, metrics)
                done.append(metrics)
                if info is not None:
                    saved.append(self._commit(info))
                if bar is not None:
                    bar.update(1)
        except (asyncio.CancelledError, KeyboardInterrupt):
            await self._save_on_interrupt(saved, done)
            raise
        finally:
            await self.source.close()
            if bar is not None:
                bar.close()
            if self._own_sinks and self._sinks is not None:
                self._sinks.close()
                self._sinks = None
        return TrainResult(self.completed, tuple(saved), tuple(done))

    async def close(self) -> None:
        """Stop what the trainer built (the rollouts its group source runs ahead). The env
        factory and backend passed in stay open: whoever built them closes them."""
        await self.source.close()

    async def _save_on_interrupt(
        self, saved: list[CheckpointInfo], done: list[UpdateMetrics]
    ) -> None:
        pending = self._pending
        if pending is not None and (not done or done[-1].update != pending.update):
            if self._sinks is not None:
                self._sinks.log("train", pending.update, pending)
            done.append(pending)
        saved_update = self.last_saved.update if self.last_saved else 0
        finished = self._uncommitted
        if finished is not None and finished.update == self.completed:
            saved.append(self._commit(finished))  # the interrupted save completed
            log.warning("interrupted: saved %s (update %d)", finished.name, finished.update)
        elif self.completed > saved_update:
            info = await self.save(self.completed)
            saved.append(info)
            log.warning("interrupted: saved %s (update %d)", info.name, info.update)
