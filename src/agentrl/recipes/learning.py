"""The learning recipe: a small model learns, by RL through the Trainer, a task it must read.

Shared by `benchmarks/learning.py` (seeds, estimators, losses, curves, table), the fast
learning test and the first phase of `agentrl demo`. Everything is the library's own: the toy
*fetch* task (`agentrl.envs.toy.fetch`: the goal is stated in every message, distractor objects,
2 steps; a uniformly random valid policy wins 1/4 at the default 4 objects x 1 receptacle), a
450-token byte-level BPE tokenizer trained offline on the task's text with the Qwen3-style chat
template (`agentrl.recipes.tokenizer`), the rollout engine, `WinMinusInvalid` rewards, the
configured advantage estimator, `build_datums`, the PPO loss, and a small Qwen3-architecture
model trained from scratch on `LocalBackend` (full fine-tuning; LoRA as an option).

A random model never writes a command, so the run starts with supervised steps on
demonstrations of a *uniformly random valid* policy: after them the model writes valid
commands at about the random policy's success rate (`success_before`), and only the reward can
teach it to pick what the goal names. Held-out success is measured on games never trained on
(other seeds), sampled at temperature 1.

Every random draw is keyed, never taken in arrival order: the weights from `seed`, the warm
start's batches from `seed`, the games from fixed seed ranges, and every sampling request from
`derive_seed(seed, what, ...)` and its group, branch and turn (the rollout engine's keyed
seeds; the random policies use `KeyedPolicySampler`). Two runs of one setup on one machine
give identical results whatever the load or the order environments answer in (with the local
backend's batch-invariant decoding); another CPU may round differently.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.algo.datums import trajectory_to_datum
from agentrl.algo.metrics import UpdateMetrics
from agentrl.backends.base import (
    AdamParams,
    LossConfig,
    LossName,
    Sampler,
)
from agentrl.chat import ChatRenderer
from agentrl.core.seeds import derive_seed
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.toy.fetch import (
    FetchCommands,
    fetch_tasks,
    random_valid_success,
)
from agentrl.envs.toy.plain import uniform_command
from agentrl.recipes.fetch import (
    BENCHMARK,
    DEMO,
    DEMO_SEED,
    HELD_OUT_SEED,
    MAX_REPLY_TOKENS,
    MAX_TRAJECTORY_TOKENS,
    SMOKE,
    TEST,
    TRAIN_SEED,
    EnvWrapper,
    LearningSetup,
    fetch_env_factory,
    fetch_rollouts,
)
from agentrl.recipes.tokenizer import fetch_tokenizer

__all__ = [
    "BENCHMARK",
    "DEMO",
    "SMOKE",
    "TEST",
    "EvalPoint",
    "LearningResult",
    "LearningSetup",
    "fetch_tokenizer",
    "held_out_success",
    "plot_learning",
    "run_learning",
]


@dataclass(frozen=True)
class EvalPoint:
    """Held-out success after `update` updates (0 = after the warm start, before RL)."""

    update: int
    success: float
    reward: float
    invalid_per_turn: float
    seconds: float
    """Seconds since the run started."""


@dataclass(frozen=True)
class LearningResult:
    """What one run measured."""

    setup: LearningSetup
    random_success: float
    """Held-out success of the uniformly random valid policy (same games, same samples)."""
    curve: tuple[EvalPoint, ...]
    train_success: tuple[float, ...]
    """Success of each update's training batch."""
    seconds: float
    degenerate_groups: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def before(self) -> float:
        """Held-out success before RL."""
        return self.curve[0].success

    @property
    def after(self) -> float:
        """Held-out success after the last update."""
        return self.curve[-1].success


def _summary(update: int, groups: Sequence[TrajectoryGroup], started: float) -> EvalPoint:
    trajectories = [t for g in groups for t in g.trajectories]
    turns = [turn for t in trajectories for turn in t.turns]
    return EvalPoint(
        update=update,
        success=float(np.mean([t.won for t in trajectories])),
        reward=float(np.mean([t.reward for t in trajectories])),
        invalid_per_turn=float(np.mean([turn.invalid for turn in turns])) if turns else 0.0,
        seconds=time.perf_counter() - started,
    )


async def held_out_success(
    sampler: Sampler,
    tokenizer: Any,
    setup: LearningSetup,
    *,
    started: float | None = None,
    update: int = 0,
    wrap_env: EnvWrapper | None = None,
) -> EvalPoint:
    """Success of `sampler` on the held-out fetch games (temperature 1, requests keyed by
    `(setup.seed, "held-out", update)` and their group, branch and turn)."""
    seed = derive_seed(setup.seed, "held-out", update)
    groups = await fetch_rollouts(
        sampler, tokenizer, setup, _held_out(setup), setup.eval_samples, seed, wrap_env
    )
    return _summary(update, groups, started if started is not None else time.perf_counter())


def _held_out(setup: LearningSetup) -> list[TaskInfo]:
    return fetch_tasks(
        setup.eval_games, HELD_OUT_SEED, "valid_unseen", setup.objects, setup.receptacles
    )


def _backend(setup: LearningSetup, tokenizer: Any, run_dir: Path) -> Any:
    from agentrl.backends.local import LocalBackend, LoraSpec

    lora = (
        None if setup.full_finetune else LoraSpec(rank=setup.lora_rank, alpha=2 * setup.lora_rank)
    )
    shape = {
        "hidden_size": setup.hidden_size,
        "intermediate_size": 3 * setup.hidden_size,
        "num_hidden_layers": setup.layers,
        "head_dim": setup.hidden_size // 4,
        "rope_theta": setup.rope_theta,
    }
    return LocalBackend.tiny(
        tokenizer,
        seed=setup.seed,
        device="cpu",
        lora=lora,
        full_finetune=setup.full_finetune,
        checkpoint_dir=run_dir / "checkpoints",
        model_overrides=shape,
    )


async def run_learning(
    setup: LearningSetup,
    tokenizer: Any,
    run_dir: Path,
    *,
    on_point: Callable[[EvalPoint], None] | None = None,
    on_update: Callable[[UpdateMetrics], None] | None = None,
    wrap_env: EnvWrapper | None = None,
) -> LearningResult:
    """Warm start, evaluate, then `setup.updates` Trainer updates with held-out evaluations.

    `wrap_env` wraps the env factory of every rollout (e.g. to delay steps in a test)."""
    from agentrl.config import TrainConfig
    from agentrl.reporting.sinks import MultiSink
    from agentrl.testing import KeyedPolicySampler
    from agentrl.training.trainer import Trainer

    started = time.perf_counter()
    random_policy = KeyedPolicySampler(tokenizer, uniform_command)
    random_point = await held_out_success(
        random_policy, tokenizer, setup, started=started, update=-1, wrap_env=wrap_env
    )
    demo_tasks = fetch_tasks(setup.demos, DEMO_SEED, "train", setup.objects, setup.receptacles)
    demo_seed = derive_seed(setup.seed, "demonstrations")
    demo_groups = await fetch_rollouts(
        random_policy, tokenizer, setup, demo_tasks, 1, demo_seed, wrap_env
    )
    demos = [
        trajectory_to_datum(t, [1.0] * len(t.turns)) for g in demo_groups for t in g.trajectories
    ]
    backend = _backend(setup, tokenizer, run_dir)
    rng = random.Random(setup.seed)
    for _ in range(setup.sft_steps):
        batch = rng.sample(demos, min(setup.sft_batch, len(demos)))
        await backend.forward_backward(batch, LossName.CROSS_ENTROPY, LossConfig())
        await backend.optim_step(AdamParams(learning_rate=setup.sft_learning_rate))
    config = TrainConfig.model_validate(
        dict(
            base_model="tiny",
            backend="local",
            device="cpu",
            env="toy",
            max_episode_steps=setup.max_steps,
            max_assistant_tokens=MAX_REPLY_TOKENS,
            max_trajectory_tokens=MAX_TRAJECTORY_TOKENS,
            max_steps=setup.updates,
            games_per_batch=setup.games_per_batch,
            group_size=setup.group_size,
            learning_rate=setup.learning_rate,
            lora_rank=setup.lora_rank,
            estimator=setup.estimator,
            loss=setup.loss,
            clip_low=setup.clip_low,
            clip_high=setup.clip_high,
            normalisation=setup.normalisation,
            norm_constant=setup.norm_constant,
            tis_cap=setup.tis_cap,
            max_steps_off_policy=setup.max_steps_off_policy,
            seed=setup.seed,
            run_dir=run_dir,
            save_every=setup.updates,
            save_rollouts=False,
        )
    )
    train_tasks = fetch_tasks(
        setup.train_games, TRAIN_SEED, "train", setup.objects, setup.receptacles
    )
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=fetch_env_factory(setup, wrap_env),
        tasks=train_tasks,
        renderer=ChatRenderer(tokenizer),
        protocol=FetchCommands(),
        sinks=MultiSink(()),  # results go to LearningResult; metrics to on_update
        progress=False,
    )
    point = await held_out_success(
        await backend.sampler(), tokenizer, setup, started=started, wrap_env=wrap_env
    )
    curve = [point]
    if on_point is not None:
        on_point(point)
    train_success: list[float] = []
    degenerate = 0
    for number in range(1, setup.updates + 1):
        metrics = await trainer.update(number)
        train_success.append(metrics.stats.success_rate)
        degenerate += metrics.degenerate_groups
        if on_update is not None:
            on_update(metrics)
        if number % setup.eval_every == 0 or number == setup.updates:
            sampler = await backend.sampler()
            point = await held_out_success(
                sampler, tokenizer, setup, started=started, update=number, wrap_env=wrap_env
            )
            curve.append(point)
            if on_point is not None:
                on_point(point)
    return LearningResult(
        setup=setup,
        random_success=random_point.success,
        curve=tuple(curve),
        train_success=tuple(train_success),
        seconds=time.perf_counter() - started,
        degenerate_groups=degenerate,
        extra={"random_success_exact": random_valid_success(setup.objects, setup.receptacles)},
    )


def plot_learning(result: LearningResult, path: Path) -> Path:
    """One run's held-out success per update, with the random valid policy's level."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    updates = [p.update for p in result.curve]
    axes.plot(updates, [p.success for p in result.curve], marker="o", label="model (held-out)")
    axes.plot(
        range(1, len(result.train_success) + 1),
        result.train_success,
        alpha=0.4,
        label="training batch",
    )
    axes.axhline(result.random_success, linestyle="--", color="grey", label="random valid policy")
    axes.set(
        title="fetch task: success per update", xlabel="update", ylabel="success", ylim=(0, 1.02)
    )
    axes.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path
