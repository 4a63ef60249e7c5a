"""The training loop: rollouts, rewards, advantages, datums, one PPO step per update.

Each update `n` (1-based):

1. a sampler for the latest weights (`TrainingBackend.sampler()`);
2. batch `n - 1` of the seeded game stream (`task_batch`: a pure function of the games, the
   seed and the index, so a resumed run plays exactly the games an uninterrupted one would);
3. one group of `group_size` trajectories per game through the rollout engine, scored by the
   reward function;
4. advantages by the configured estimator; trajectories whose advantages are all zero are
   skipped; one datum per remaining trajectory;
5. one `forward_backward` (PPO, clip 0.8 / 1.2 by default) and one `optim_step` (skipped when
   no datum is left, e.g. every group degenerate); with `stream_groups`, steps 4-5 run group by
   group while the rollout goes on (`agentrl.training.streaming`), still ending in ONE `optim_step`;
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
`max_steps_off_policy = k`, dynamic sampling, straggler timings) is `agentrl.training.pipeline`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agentrl.algo.advantages import AdvantageEstimator, Advantages, check_finite
from agentrl.algo.datums import build_datums
from agentrl.algo.metrics import UpdateMetrics, update_metrics
from agentrl.algo.rewards import RewardFn
from agentrl.backends.base import ForwardBackwardResult, Sampler, TrainingBackend
from agentrl.backends.streaming import open_stream
from agentrl.chat import ChatRenderer
from agentrl.config import StalePolicy, TrainConfig
from agentrl.core.env import EnvGroupFactory, close_env_factory
from agentrl.core.types import JsonObject, TaskInfo, TrajectoryGroup
from agentrl.reporting.sinks import MetricSink, make_sinks
from agentrl.rollout import rollout_batch
from agentrl.store.lock import OutputLock
from agentrl.store.records import TrajectoryRecord, append_records
from agentrl.tools import ToolProtocol
from agentrl.training.build import rollout_config_for
from agentrl.training.checkpoints import (
    CHECKPOINTS_DIR,
    METRICS_FILE,
    ROLLOUTS_FILE,
    RUN_FILE,
    CheckpointInfo,
    check_run_dir,
)
from agentrl.training.pipeline import GroupHook, GroupSource, Rollout, extra_batch
from agentrl.training.preflight import check_token_budget
from agentrl.training.resume import (
    ORDER_FIELDS,
    check_same_run,
    drop_unsaved_records,
    load_latest,
    read_run_file,
    write_run_file,
)
from agentrl.training.streaming import GroupStreamer, check_streaming

__all__ = ["ORDER_FIELDS", "TrainResult", "Trainer", "task_batch"]

log = logging.getLogger(__name__)


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


def _fingerprint(tasks: Sequence[TaskInfo]) -> str:
    ids = sorted(f"{t.split}/{t.task_id}" for t in tasks)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


class Trainer:
    """Runs the update loop of one training run (see the module docstring)."""

    def __init__(
        self,
        *,
        config: TrainConfig,
        backend: TrainingBackend,
        env_factory: EnvGroupFactory,
        tasks: Sequence[TaskInfo],
        renderer: ChatRenderer,
        protocol: ToolProtocol,
        estimator: AdvantageEstimator | None = None,
        reward_fn: RewardFn | None = None,
        sinks: MetricSink | None = None,
        progress: bool = True,
    ) -> None:
        if not tasks:
            raise ValueError("Trainer needs at least one training task")
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
        # No fixed per-request seed: every request would draw the same random numbers.
        # The backend's sampler is seeded from `config.seed` instead.
        sampling = replace(config.sampling_params(), seed=None)
        self.rollout = rollout_config_for(config, config.group_size, sampling)
        self.completed = 0
        """The last completed update."""
        self.last_saved: CheckpointInfo | None = None
        self._pending: UpdateMetrics | None = None
        self.source = GroupSource(
            rollout=self.rollout_games,
            sampler=self.backend.sampler,
            games=lambda n: task_batch(self.tasks, config.games_per_batch, config.seed, n - 1),
            extra_games=lambda n, count: extra_batch(self.tasks, count, config.seed, n),
            estimator=self.estimator,
            max_steps_off_policy=config.max_steps_off_policy,
            resample_stale=config.stale_groups is StalePolicy.RESAMPLE,
            dynamic_budget=config.dynamic_sampling_budget,
            last_update=config.max_steps,
        )
        self._uncommitted: CheckpointInfo | None = None
        if config.stream_groups:
            check_streaming(backend, self.estimator, config.loss, config.loss_config())

    # -- one update ------------------------------------------------------------------------

    async def rollout_update(self, number: int) -> list[TrajectoryGroup]:
        """Roll out the games of update `number` with the latest weights."""
        sampler = await self.backend.sampler()
        tasks = task_batch(self.tasks, self.config.games_per_batch, self.config.seed, number - 1)
        rolled = await self.rollout_games(tasks, sampler, self.completed, f"update {number}")
        return list(rolled.groups)

    async def rollout_games(
        self,
        tasks: Sequence[TaskInfo],
        sampler: Sampler,
        version: int,
        label: str,
        on_group: GroupHook | None = None,
    ) -> Rollout:
        """Play `tasks` with `sampler` (taken after `version` updates), timing each group and
        handing it to `on_group` as it finishes."""
        bar = None
        if self.progress:
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
                env_factory=self.env_factory,
                sampler=sampler,
                renderer=self.renderer,
                protocol=self.protocol,
                config=self.rollout,
                reward_fn=self.reward_fn,
                max_concurrent_groups=self.config.max_concurrent_games or len(tasks),
                on_group=tick,
            )
            return Rollout(tuple(groups), version, tuple(seconds))
        finally:
            if bar is not None:
                bar.close()

    async def _step(self, result: ForwardBackwardResult, timings: dict[str, float]) -> _Trained:
        clock = time.perf_counter()
        optim = dict(await self.backend.optim_step(self.config.adam_params()))
        timings["optim_step"] = time.perf_counter() - clock
        return _Trained(result, optim, timings)

    async def _train(self, groups: Sequence[TrajectoryGroup]) -> _Trained:
        """Advantages, datums, one forward_backward and one optim_step (none without datums)."""
        config = self.config
        clock = time.perf_counter()
        advantages = self.estimator.estimate(groups)
        check_finite(advantages)
        datums = build_datums(groups, advantages, skip_zero_advantage=True)
        timings = {"advantages": time.perf_counter() - clock}
        if not datums:
            return _Trained(None, {}, timings, advantages)
        clock = time.perf_counter()
        result = await self.backend.forward_backward(datums, config.loss, config.loss_config())
        timings["forward_backward"] = time.perf_counter() - clock
        return replace(await self._step(result, timings), advantages=advantages)

    async def _train_streamed(
        self, streamer: GroupStreamer, groups: Sequence[TrajectoryGroup]
    ) -> _Trained:
        """The rest of a streamed batch, the stream's finish, one optim_step."""
        try:
            batch = await streamer.finish(groups)
        except BaseException:
            await streamer.abort()  # no half-batch gradient is left for a later step
            raise
        timings = {
            "advantages": batch.advantages_seconds,
            "forward_backward": batch.forward_backward_seconds,
            "stream_overlap": batch.overlap_seconds,
        }
        if batch.result is None:
            return _Trained(None, {}, timings, batch.advantages)
        return replace(await self._step(batch.result, timings), advantages=batch.advantages)

    def _streamer(self) -> GroupStreamer | None:
        if not self.config.stream_groups:
            return None
        stream = open_stream(self.backend, self.config.loss, self.config.loss_config())
        return GroupStreamer(stream, self.estimator)

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
        rollout_seconds = time.perf_counter() - clock
        work = self._train(groups) if streamer is None else self._train_streamed(streamer, groups)
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
            self._uncommitted = self._info(number, name, ref.state_path, ref.sampler_path)
            raise
        return self._info(number, name, ref.state_path, ref.sampler_path)

    def _info(self, number: int, name: str, state: str, sampler: str) -> CheckpointInfo:
        return CheckpointInfo(
            name=name,
            update=number,
            state_path=state,
            sampler_path=sampler,
            base_model=self.config.base_model,
            backend=self.config.backend.value,
        )

    def _commit(self, info: CheckpointInfo) -> CheckpointInfo:
        """Write the checkpoint record: from now on `--resume` continues from it."""
        folder = self.run_dir / CHECKPOINTS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        info.write(folder / f"{info.name}.json")
        self.last_saved = info
        self._uncommitted = None
        return info

    async def _start(self) -> int:
        """Check the run folder, resume if asked; return the first update to run."""
        config, run_file = self.config, self.run_dir / RUN_FILE
        state: JsonObject = {
            "config": config.model_dump(mode="json"),
            "tasks": len(self.tasks),
            "tasks_fingerprint": _fingerprint(self.tasks),
            "chat": self.renderer.record.as_json(),
        }
        if not config.resume:
            check_run_dir(config)
            write_run_file(run_file, state)
            return 1
        if run_file.exists():
            check_same_run(self.run_dir, read_run_file(run_file), state)
        else:
            write_run_file(run_file, state)
        latest = await load_latest(self.backend, self.run_dir, fallback=config.resume_fallback)
        done = 0 if latest is None else latest.update
        drop_unsaved_records(self.run_dir, done)
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
        await check_token_budget(  # before anything is written to the run folder
            self.tasks[0],
            env_factory=self.env_factory,
            renderer=self.renderer,
            protocol=self.protocol,
            config=self.rollout,
        )
        first = await self._start()
        if self._sinks is None:
            self._sinks = make_sinks(
                self.run_dir / METRICS_FILE,
                swanlab_mode=config.swanlab_mode,
                swanlab_project=config.swanlab_project,
                wandb_mode=config.wandb_mode,
                wandb_project=config.wandb_project,
                experiment_name=config.experiment_name or self.run_dir.name,
                config=config.model_dump(mode="json"),
                console=self.progress,
            )
        saved: list[CheckpointInfo] = []
        done: list[UpdateMetrics] = []
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=config.max_steps, initial=first - 1, desc="training", unit="update")
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
        """Stop what the env factory holds (its worker pool): no process is left behind."""
        await close_env_factory(self.env_factory)

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
