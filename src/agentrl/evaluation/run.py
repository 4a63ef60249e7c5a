"""Evaluation: play validation games, one JSONL file of episodes, summaries per split and type.

`evaluate_tasks` is the engine: it plays games concurrently (at most `games_per_batch` at a
time), appends every episode to the output file as soon as its game ends (flushed, so a crash
loses only the games still running), and at the end writes one `type=summary` record per split
and `overall` (see docs/evaluation.md). An existing file is never overwritten unless asked;
`resume=True` skips the episodes already in it and finishes the rest. Who plays is a `PlayFn`
(one game in, one `TrajectoryGroup` out): `model_player` (the rollout engine and a `Sampler`)
or an env's baseline player (one of its `EnvSpec.baselines`: the ALFWorld planner, the pycode
and search solvers, search's no-search policy), played through the same engine, so its
episodes, statuses and metrics are recorded exactly like a model's.

`evaluate(config)` assembles everything from an `EvalConfig` (what `agentrl eval` runs). The
summaries and the run's label: `agentrl.evaluation.summary`.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl._legacy import moved_name
from agentrl.algo.metrics import SplitSummary
from agentrl.config import EvalConfig, EvalPolicy
from agentrl.config.envspec import Baseline
from agentrl.config.plugins import env_spec, env_specs
from agentrl.core.env import close_env_factory
from agentrl.core.progress import progress_bar
from agentrl.core.types import (
    JsonObject,
    StopReason,
    TaskInfo,
    Trajectory,
    TrajectoryGroup,
)
from agentrl.evaluation.summary import default_label, log_summaries, write_summaries
from agentrl.reporting.sinks import MetricSink
from agentrl.rollout import PlayFn, model_player
from agentrl.store.eval_records import (
    episode_id,
    episode_record,
    read_eval_file,
    run_record,
)
from agentrl.store.jsonl import JsonlWriter, WriteMode
from agentrl.store.lock import OutputLock, check_not_in_use
from agentrl.store.records import TrajectoryRecord
from agentrl.training.preflight import check_token_budget

__all__ = ["RESUME_IGNORED", "EvalOutcome", "evaluate", "evaluate_tasks"]

log = logging.getLogger(__name__)

RESUME_IGNORED = frozenset(
    {"resume", "overwrite_output", "retry_errors", "games_per_batch", "swanlab_mode", "wandb_mode"}
)
"""Settings that may differ between an interrupted evaluation and its `--resume`."""


@dataclass(frozen=True)
class EvalOutcome:
    """What an evaluation wrote."""

    path: Path
    label: str
    summaries: tuple[SplitSummary, ...]
    """Per split, then `overall`, over every episode in the file."""
    played: int
    """Episodes played by this call."""
    skipped: int
    """Episodes already in the file (resume)."""


def __getattr__(name: str) -> object:
    """`planner_player` moved into the ALFWorld plug-in (`agentrl.envs.alfworld.baseline`)."""
    return moved_name(__name__, name)


def _failed_group(task: TaskInfo, samples: int, error: BaseException) -> TrajectoryGroup:
    """A game whose player raised: every sample recorded as an `env_error` episode."""
    message = f"{type(error).__name__}: {error}"
    trajectories = tuple(
        Trajectory(
            turns=(),
            stop_reason=StopReason.ENV_ERROR,
            won=False,
            group_id=task.task_id,
            task=task,
            branch=i,
            error=message,
        )
        for i in range(samples)
    )
    return TrajectoryGroup(group_id=task.task_id, task=task, trajectories=trajectories)


def _open(
    output: Path, overwrite: bool, resume: bool, run_config: JsonObject, retry_errors: bool = False
) -> tuple[WriteMode, frozenset[str]]:
    """How to open the output, and the episode ids it already holds (and need not replay)."""
    if not output.exists():
        return WriteMode.CREATE, frozenset()
    if overwrite:
        return WriteMode.OVERWRITE, frozenset()
    if not resume:
        raise FileExistsError(
            f"{output} already exists; refusing to overwrite it. Pass --resume to finish an "
            "interrupted evaluation, --overwrite-output to replace it, or another --output."
        )
    with warnings.catch_warnings():  # the writer reports (and drops) a cut last line
        warnings.simplefilter("ignore")
        data = read_eval_file(output)
    differs = sorted(
        key
        for key in set(data.config) | set(run_config)
        if key not in RESUME_IGNORED and data.config.get(key) != run_config.get(key)
    )
    if data.config and differs:
        detail = ", ".join(f"{k}: {data.config.get(k)!r} -> {run_config.get(k)!r}" for k in differs)
        raise ValueError(
            f"{output} was written with other settings ({detail}); resume it with the same "
            "settings, or write a new --output"
        )
    if retry_errors:  # replayed episodes are appended; a reader keeps an id's last record
        kept = (e for e in data.episodes if not e.record.stop_reason.is_error)
        return WriteMode.APPEND, frozenset(e.episode_id for e in kept)
    return WriteMode.APPEND, data.finished_ids


async def evaluate_tasks(
    tasks: Sequence[TaskInfo],
    play: PlayFn,
    output: Path,
    *,
    label: str,
    samples_per_game: int = 1,
    games_per_batch: int = 16,
    run_config: JsonObject | None = None,
    overwrite: bool = False,
    resume: bool = False,
    sinks: MetricSink | None = None,
    progress: bool = True,
    retry_errors: bool = False,
) -> EvalOutcome:
    """Play every task (`samples_per_game` episodes each) and write the eval JSONL file.

    The output is locked while it is written (`OutputInUseError` for a second writer);
    `retry_errors` (with `resume`) plays again the episodes that ended with an error.
    """
    if games_per_batch < 1:
        raise ValueError(f"games_per_batch must be >= 1, got {games_per_batch}")
    output = Path(output)
    with OutputLock(output, what="eval output"):
        return await _evaluate_locked(
            tasks,
            play,
            output,
            label=label,
            samples_per_game=samples_per_game,
            games_per_batch=games_per_batch,
            config=dict(run_config or {}),
            overwrite=overwrite,
            resume=resume,
            sinks=sinks,
            progress=progress,
            retry_errors=retry_errors,
        )


async def _evaluate_locked(
    tasks: Sequence[TaskInfo],
    play: PlayFn,
    output: Path,
    *,
    label: str,
    samples_per_game: int,
    games_per_batch: int,
    config: JsonObject,
    overwrite: bool,
    resume: bool,
    sinks: MetricSink | None,
    progress: bool,
    retry_errors: bool,
) -> EvalOutcome:
    mode, finished = _open(output, overwrite, resume, config, retry_errors)
    ids = {t.task_id: [episode_id(t, s) for s in range(samples_per_game)] for t in tasks}
    todo = [t for t in tasks if not all(e in finished for e in ids[t.task_id])]
    skipped = sum(1 for t in tasks for e in ids[t.task_id] if e in finished)
    gate = asyncio.Semaphore(games_per_batch)
    bar = None
    if progress:
        bar = progress_bar(total=len(todo), desc=f"eval {label}", unit="game")
    wins = played = 0
    with JsonlWriter(output, mode) as writer:
        if mode is not WriteMode.APPEND:
            writer.write(run_record(label, config))

        async def one(task: TaskInfo) -> None:
            nonlocal wins, played
            async with gate:
                try:
                    group = await play(task)
                except Exception as exc:  # a broken game is recorded, the rest goes on
                    log.warning("game %s failed: %s", task.task_id, exc)
                    group = _failed_group(task, samples_per_game, exc)
            for sample, trajectory in enumerate(group.trajectories):
                if episode_id(task, sample) in finished:
                    continue
                writer.write(episode_record(TrajectoryRecord.from_trajectory(trajectory), sample))
                played += 1
                wins += trajectory.won
            if bar is not None:
                bar.update(1)
                bar.set_postfix(success=f"{wins / max(played, 1):.1%}")

        try:
            await asyncio.gather(*(one(t) for t in todo))
        finally:
            if bar is not None:
                bar.close()
        wanted = {e for es in ids.values() for e in es}
        summaries = write_summaries(writer, output, wanted, label)
    if sinks is not None:
        log_summaries(sinks, summaries)
    return EvalOutcome(output, label, summaries, played, skipped)


def _baseline(config: EvalConfig) -> Baseline | None:
    """The env's baseline player `--policy` names (None: the model plays)."""
    if config.policy is EvalPolicy.MODEL:
        return None
    policy = config.policy.value
    spec = env_spec(config.env)
    baseline = spec.baseline_for(policy)
    if baseline is not None:
        return baseline
    offered = ", ".join(("model", *spec.policies))
    owners = [(s, b) for s in env_specs() if (b := s.baseline_for(policy)) is not None]
    if not owners:
        raise ValueError(
            f"--policy {policy}: no installed env has a {policy} baseline; --env {spec.name} "
            f"offers --policy {offered}"
        )
    where = ", or ".join(f"{b.plays} only with --env {s.name}" for s, b in owners)
    raise ValueError(
        f"--policy {policy} plays {where}; --env {spec.name} offers --policy {offered}"
    )


async def evaluate(
    config: EvalConfig, *, sinks: MetricSink | None = None, progress: bool = True
) -> EvalOutcome:
    """Run the evaluation `config` describes (what `agentrl eval` does)."""
    from agentrl.training import recipe

    check_not_in_use(config.output, what="eval output")  # refuse before loading any model
    if config.output.exists() and not (config.overwrite_output or config.resume):
        _open(config.output, False, False, {})
    baseline = _baseline(config)
    recipe.check_credentials(config)  # a baseline samples from no model: no credentials
    tasks = recipe.tasks_for(config, config.split.splits, config.limit_per_split, progress=progress)
    protocol = recipe.tool_protocol_for(config)
    planner = baseline is not None
    tokenizer: Any
    if planner and config.tokenizer_path is None:
        from agentrl.chat.tokenizers import build_qwen_tokenizer

        tokenizer = build_qwen_tokenizer()  # token counts only; no model is involved
    else:
        tokenizer = recipe.tokenizer_for(config)
    renderer = recipe.renderer_for(tokenizer, protocol, config)
    rollout = recipe.rollout_config_for(
        config, config.trajectories_per_game, config.sampling_params()
    )
    env_factory = recipe.env_factory_for(config)  # built here, so closed here (below)
    sampler: object = None
    try:
        if tasks:
            await check_token_budget(
                tasks[0],
                env_factory=env_factory,
                renderer=renderer,
                protocol=protocol,
                config=rollout,
            )
        if baseline is not None:
            play = baseline.player(
                env_factory=env_factory,
                renderer=renderer,
                protocol=protocol,
                rollout=rollout,
                reward_fn=config.reward_fn(),
            )
        else:
            sampler = await recipe.eval_sampler_for(config, tokenizer)
            play = model_player(
                env_factory=env_factory,
                sampler=sampler,
                renderer=renderer,
                protocol=protocol,
                rollout=rollout,
                reward_fn=config.reward_fn(),
            )
        return await evaluate_tasks(
            tasks,
            play,
            config.output,
            label=default_label(config),
            samples_per_game=config.trajectories_per_game,
            games_per_batch=config.games_per_batch,
            run_config={**config.model_dump(mode="json"), "chat": renderer.record.as_json()},
            overwrite=config.overwrite_output,
            resume=config.resume,
            sinks=sinks,
            progress=progress,
            retry_errors=config.retry_errors,
        )
    finally:
        await close_env_factory(env_factory)
        close = getattr(sampler, "close", None)
        if close is not None:  # a remote sampler finishes its service session
            await close()
