"""The learning recipe: a small model learns, by RL through the Trainer, a task it must read.

`learn(env, setup, run_dir)` runs it on any env (a `LearningEnv`: an env factory, training and
held-out tasks, a protocol; `learning_env_from_spec` makes one of an `EnvSpec`): the project
tokenizer trained on the env's own rendered text (`agentrl.recipes.tokenizer.env_tokenizer`),
a warm start on a given or the uniformly random valid policy, RL through the `Trainer`, and
held-out evaluations. `run_learning(setup, tokenizer, run_dir)` is its fetch instance, below.

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

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentrl.algo.datums import kept_datums, trajectory_to_datum
from agentrl.algo.metrics import UpdateMetrics
from agentrl.backends.base import (
    AdamParams,
    LossConfig,
    LossName,
    Sampler,
)
from agentrl.core.seeds import derive_seed
from agentrl.core.types import TrajectoryGroup
from agentrl.recipes.fetch import (
    BENCHMARK,
    DEMO,
    ROBUST,
    SMOKE,
    TEST,
    EnvWrapper,
    LearningSetup,
    fetch_learning_env,
)
from agentrl.recipes.learning_env import (
    KeyedPolicy,
    LearningEnv,
    check_lists_actions,
    config_env_name,
    play,
    random_valid_policy,
)
from agentrl.recipes.tokenizer import env_tokenizer, fetch_tokenizer
from agentrl.training.rejection import won

if TYPE_CHECKING:
    from agentrl.training.distillation import Distillation
    from agentrl.training.rejection import RejectionSampling

__all__ = [
    "BENCHMARK",
    "DEMO",
    "ROBUST",
    "SMOKE",
    "TEST",
    "EvalPoint",
    "LearningEnv",
    "LearningResult",
    "LearningSetup",
    "evaluate_held_out",
    "fetch_tokenizer",
    "held_out_success",
    "learn",
    "load_teacher",
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
    env: str = "toy-fetch"
    """The env's name (`LearningEnv.name`)."""

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


async def evaluate_held_out(
    sampler: Sampler,
    tokenizer: Any,
    env: LearningEnv,
    setup: LearningSetup,
    *,
    started: float | None = None,
    update: int = 0,
    wrap_env: EnvWrapper | None = None,
) -> EvalPoint:
    """Success of `sampler` on the env's held-out tasks, `setup.eval_samples` each
    (temperature 1, requests keyed by `(setup.seed, "held-out", update)` and their group,
    branch and turn)."""
    seed = derive_seed(setup.seed, "held-out", update)
    groups = await play(
        sampler, tokenizer, env, env.held_out_tasks, setup.eval_samples, seed, wrap_env
    )
    return _summary(update, groups, started if started is not None else time.perf_counter())


async def held_out_success(
    sampler: Sampler,
    tokenizer: Any,
    setup: LearningSetup,
    *,
    started: float | None = None,
    update: int = 0,
    wrap_env: EnvWrapper | None = None,
) -> EvalPoint:
    """Success of `sampler` on the held-out fetch games (`evaluate_held_out` on the fetch env
    of `setup`)."""
    env = fetch_learning_env(setup)
    return await evaluate_held_out(
        sampler, tokenizer, env, setup, started=started, update=update, wrap_env=wrap_env
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
        "num_attention_heads": setup.heads,
        "num_key_value_heads": max(1, setup.heads // 2),
        "head_dim": setup.hidden_size // setup.heads,
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


def won_datums(groups: Sequence[TrajectoryGroup]) -> list[Any]:
    """The supervised datums (every assistant token, weight 1) of the won trajectories of
    `groups`, in order: the rejection-sampling filter of a winners-only warm start."""
    return kept_datums(groups, won)


WINNER_ROUNDS = 32
"""The most rounds of play `warm_winners_only` takes to collect its winning demonstrations."""


async def _demonstrations(
    policy: Sampler, tokenizer: Any, env: LearningEnv, setup: LearningSetup, wrap: EnvWrapper | None
) -> list[Any]:
    """`setup.demos` datums of `policy`'s play: one game per demonstration task while there
    are enough, else several (keyed) plays of each."""
    tasks = env.demonstration_tasks
    if setup.warm_winners_only:
        return await _winning_demonstrations(policy, tokenizer, env, setup, wrap)
    group = max(1, math.ceil(setup.demos / len(tasks)))
    tasks = tasks[: setup.demos] if group == 1 else tasks
    seed = derive_seed(setup.seed, "demonstrations")
    groups = await play(policy, tokenizer, env, tasks, group, seed, wrap)
    demos = [trajectory_to_datum(t, [1.0] * len(t.turns)) for g in groups for t in g.trajectories]
    return demos[: setup.demos]


async def _winning_demonstrations(
    policy: Sampler, tokenizer: Any, env: LearningEnv, setup: LearningSetup, wrap: EnvWrapper | None
) -> list[Any]:
    """`setup.demos` datums of `policy`'s *won* games (rejection sampling): rounds of keyed
    plays of every demonstration task, the winners kept in play order, until there are enough
    (at most `WINNER_ROUNDS` rounds; fewer winners than asked is an error naming the count)."""
    tasks = env.demonstration_tasks
    demos: list[Any] = []
    for round_index in range(WINNER_ROUNDS):
        seed = derive_seed(setup.seed, "demonstrations", "winners", round_index)
        demos += won_datums(await play(policy, tokenizer, env, tasks, 1, seed, wrap))
        if len(demos) >= setup.demos:
            return demos[: setup.demos]
    raise ValueError(
        f"warm_winners_only: {len(demos)} won games in {WINNER_ROUNDS} rounds of "
        f"{len(tasks)} demonstration tasks, fewer than setup.demos={setup.demos}; lower demos "
        "or give more demonstration tasks"
    )


async def learn(
    env: LearningEnv,
    setup: LearningSetup,
    run_dir: Path,
    *,
    tokenizer: Any | None = None,
    warm_policy: KeyedPolicy | None = None,
    on_point: Callable[[EvalPoint], None] | None = None,
    on_update: Callable[[UpdateMetrics], None] | None = None,
    wrap_env: EnvWrapper | None = None,
    distillation: Distillation | None = None,
    rejection: RejectionSampling | None = None,
    behaviour: Sampler | None = None,
    save: bool = False,
    stop_at: float | None = None,
) -> LearningResult:
    """The learning recipe on `env`: the random valid policy's held-out success; a warm start
    of `setup.sft_steps` supervised steps on `setup.demos` demonstrations of `warm_policy`
    (default: the random valid policy); then `setup.updates` Trainer updates (PPO, groups of
    `setup.group_size`), evaluated on the held-out tasks before RL and every `eval_every`.

    `tokenizer` defaults to `env_tokenizer(env)` (the project BPE trained on the env's rendered
    random play); `wrap_env` wraps the env factory of every rollout (e.g. delays in a test);
    with `distillation` the updates distil its teacher (on-policy distillation) instead of RL
    on the reward alone, with `rejection` they train on the kept trajectories (RFT), and with
    `behaviour` as well those trajectories are played by that sampler (e.g. a teacher's: SFT on
    its winning trajectories) instead of the model being trained; `save`
    checkpoints the last update's weights in `run_dir` (`load_teacher` reads them); `stop_at`
    ends the run at the first held-out evaluation whose success reaches it (a benchmark that
    counts updates to a target need not play on)."""
    from agentrl.config import TrainConfig
    from agentrl.reporting.sinks import MultiSink
    from agentrl.testing import KeyedPolicySampler
    from agentrl.training.trainer import Trainer

    started = time.perf_counter()
    await check_lists_actions(env)
    tokenizer = env_tokenizer(env) if tokenizer is None else tokenizer
    random_policy = KeyedPolicySampler(tokenizer, random_valid_policy(env.protocol))
    random_point = await evaluate_held_out(
        random_policy, tokenizer, env, setup, started=started, update=-1, wrap_env=wrap_env
    )
    teacher = random_policy if warm_policy is None else KeyedPolicySampler(tokenizer, warm_policy)
    demos = await _demonstrations(teacher, tokenizer, env, setup, wrap_env)
    backend = _backend(setup, tokenizer, run_dir)
    rng = random.Random(setup.seed)
    for _ in range(setup.sft_steps):
        batch = rng.sample(demos, min(setup.sft_batch, len(demos)))
        await backend.forward_backward(batch, LossName.CROSS_ENTROPY, LossConfig())
        await backend.optim_step(AdamParams(learning_rate=setup.sft_learning_rate))
    if setup.kl_coef > 0:
        backend.freeze_reference()
    config = TrainConfig.model_validate(
        dict(
            base_model="tiny",
            backend="local",
            device="cpu",
            env=config_env_name(env.name),
            max_episode_steps=env.max_steps,
            max_assistant_tokens=env.max_reply_tokens,
            max_trajectory_tokens=env.max_trajectory_tokens,
            max_steps=setup.updates,
            games_per_batch=setup.games_per_batch,
            group_size=setup.group_size,
            learning_rate=setup.learning_rate,
            lr_schedule=setup.lr_schedule,
            final_learning_rate=setup.final_learning_rate,
            warmup_updates=setup.warmup_updates,
            lora_rank=setup.lora_rank,
            estimator=setup.estimator,
            loss=setup.loss,
            clip_low=setup.clip_low,
            clip_high=setup.clip_high,
            normalisation=setup.normalisation,
            norm_constant=setup.norm_constant,
            tis_cap=setup.tis_cap,
            kl_coef=setup.kl_coef,
            max_steps_off_policy=setup.max_steps_off_policy,
            optim_substeps=setup.optim_substeps,
            async_rollouts=setup.async_rollouts,
            max_staleness=setup.max_staleness,
            seed=setup.seed,
            run_dir=run_dir,
            save_every=setup.updates,
            save_rollouts=False,
        )
    )
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=env.env_factory if wrap_env is None else wrap_env(env.env_factory),
        tasks=env.train_tasks,
        renderer=env.renderer(tokenizer),
        protocol=env.protocol,
        reward_fn=env.reward_fn,
        sinks=MultiSink(()),  # results go to LearningResult; metrics to on_update
        progress=False,
        distillation=distillation,
        rejection=rejection,
        behaviour=None if behaviour is None else partial(_same, behaviour),
    )

    async def evaluate(update: int) -> EvalPoint:
        sampler = await backend.sampler()
        point = await evaluate_held_out(
            sampler, tokenizer, env, setup, started=started, update=update, wrap_env=wrap_env
        )
        if on_point is not None:
            on_point(point)
        return point

    curve = [await evaluate(0)]
    train_success: list[float] = []
    degenerate = 0
    number = 0
    try:
        while number < setup.updates and (stop_at is None or curve[-1].success < stop_at):
            number += 1
            metrics = await trainer.update(number)
            train_success.append(metrics.stats.success_rate)
            degenerate += metrics.degenerate_groups
            if on_update is not None:
                on_update(metrics)
            if number % setup.eval_every == 0 or number == setup.updates:
                curve.append(await evaluate(number))
        if save:
            await trainer.save(number)
    finally:
        await trainer.close()  # rollouts still running ahead (k >= 1, async) are cancelled
    extra = {} if env.random_success is None else {"random_success_exact": env.random_success}
    return LearningResult(
        setup=setup,
        random_success=random_point.success,
        curve=tuple(curve),
        train_success=tuple(train_success),
        seconds=time.perf_counter() - started,
        degenerate_groups=degenerate,
        extra=extra,
        env=env.name,
    )


async def _same(sampler: Sampler) -> Sampler:
    """`sampler` itself, as a `Trainer(behaviour=...)` (a sampler of fixed weights)."""
    return sampler


async def run_learning(
    setup: LearningSetup,
    tokenizer: Any,
    run_dir: Path,
    *,
    on_point: Callable[[EvalPoint], None] | None = None,
    on_update: Callable[[UpdateMetrics], None] | None = None,
    wrap_env: EnvWrapper | None = None,
    distillation: Distillation | None = None,
    rejection: RejectionSampling | None = None,
    behaviour: Sampler | None = None,
    save: bool = False,
    stop_at: float | None = None,
) -> LearningResult:
    """The fetch recipe: `learn` on `fetch_learning_env(setup)` with `tokenizer`
    (`fetch_tokenizer(setup)`). `wrap_env` wraps the env factory of every rollout;
    `distillation`: on-policy distillation of its teacher; `rejection`: rejection-sampling
    fine-tuning (with `behaviour`: of that sampler's trajectories); `save`: checkpoint the end;
    `stop_at`: stop at an evaluation reaching it (see `learn`)."""
    return await learn(
        fetch_learning_env(setup),
        setup,
        run_dir,
        tokenizer=tokenizer,
        on_point=on_point,
        on_update=on_update,
        wrap_env=wrap_env,
        distillation=distillation,
        rejection=rejection,
        behaviour=behaviour,
        save=save,
        stop_at=stop_at,
    )


async def load_teacher(setup: LearningSetup, tokenizer: Any, run_dir: Path) -> Any:
    """The sampler (a `Teacher`) of the latest checkpoint of the learning run in `run_dir`
    (trained with `setup`'s model shape and `tokenizer`)."""
    from agentrl.training.checkpoints import latest_checkpoint

    info = latest_checkpoint(run_dir)
    if info is None:
        raise FileNotFoundError(f"no checkpoint under {run_dir}/checkpoints to load a teacher from")
    backend = _backend(setup, tokenizer, run_dir / "teacher-load")
    await backend.load(info.ref)
    return await backend.sampler()


def plot_learning(result: LearningResult, path: Path) -> Path:
    """One run's held-out success per update, with the random valid policy's level."""
    from agentrl.reporting.plots import Level, success_curve_plot

    return success_curve_plot(
        path,
        held_out=[(p.update, p.success) for p in result.curve],
        held_out_label="model (held-out)",
        batches=result.train_success,
        batch_label="training batch",
        levels=[Level(result.random_success, "random valid policy")],
        title=f"{result.env}: success per update",
        xlabel="update",
        legend="lower right",
    )
