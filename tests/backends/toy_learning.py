"""A reproducible learning experiment: GRPO-style training of the tiny model on the toy task.

Everything is real: the Qwen tokenizer and chat template, the rollout engine, the toy
`EnvGroup`, `WinMinusInvalid` rewards, an advantage estimator, `build_datums`, and a tiny random
Qwen3 model trained through `LocalBackend` (LoRA, PPO loss, AdamW). A random model never writes
a usable reply, so the experiment uses the plain-command protocol and warm-starts with a few
supervised steps on demonstrations whose commands are drawn *uniformly* from the available
actions: after the warm start the model writes commands, but which are executable in the
current state only the reward can teach. The LoRA learning test (`test_learning.py`) runs
it; all seeds are fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.advantages import AdvantageEstimator, GroupMean
from agentrl.backends.base import AdamParams, LossConfig, LossName, Sampler, SamplingParams
from agentrl.backends.local.backend import LocalBackend
from agentrl.backends.local.model import LoraSpec
from agentrl.chat import ChatRenderer
from agentrl.datums import build_datums, trajectory_to_datum
from agentrl.envs.toy import make_toy_group, toy_tasks
from agentrl.envs.toy.plain import PlainCommands, uniform_command_policy
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.testing import PolicySampler
from agentrl.types import TaskInfo, TrajectoryGroup

__all__ = [
    "MULTI_TURN",
    "SINGLE_STEP",
    "BatchSummary",
    "ToyLearningResult",
    "ToyLearningSetup",
    "plot_learning_curves",
]


@dataclass(frozen=True)
class ToyLearningSetup:
    """One learning experiment (all seeds fixed)."""

    env_steps: int
    sft_steps: int
    updates: int
    games_per_update: int
    group_size: int
    rl_learning_rate: float
    demos: int = 8
    sft_learning_rate: float = 5e-3
    eval_games: int = 8
    eval_group: int = 8
    seed: int = 0


SINGLE_STEP = ToyLearningSetup(
    env_steps=1, sft_steps=25, updates=12, games_per_update=8, group_size=8, rl_learning_rate=4e-3
)
"""One command per episode; reward in [-0.1, 0] (about a minute on 2 CPU cores)."""

MULTI_TURN = ToyLearningSetup(
    env_steps=4, sft_steps=25, updates=14, games_per_update=4, group_size=8, rl_learning_rate=3e-3
)
"""Up to four commands per episode; reward in [-0.4, 1] (a few minutes on 2 CPU cores)."""


@dataclass(frozen=True)
class BatchSummary:
    """Mean reward, success and invalid-action rate of a batch of groups."""

    reward: float
    success: float
    invalid_per_turn: float
    trajectories: int
    degenerate_groups: int = 0

    @classmethod
    def of(cls, groups: Sequence[TrajectoryGroup], degenerate_groups: int = 0) -> BatchSummary:
        """Summarise rolled-out groups."""
        trajectories = [t for g in groups for t in g.trajectories]
        turns = [turn for t in trajectories for turn in t.turns]
        return cls(
            reward=float(np.mean([t.reward for t in trajectories])),
            success=float(np.mean([t.won for t in trajectories])),
            invalid_per_turn=float(np.mean([turn.invalid for turn in turns])) if turns else 0.0,
            trajectories=len(trajectories),
            degenerate_groups=degenerate_groups,
        )


@dataclass(frozen=True)
class ToyLearningResult:
    """Held-out evaluation before and after training, and the per-update training batches."""

    before: BatchSummary
    after: BatchSummary
    history: tuple[BatchSummary, ...]


async def run_toy_learning(
    setup: ToyLearningSetup,
    tokenizer: Any,
    estimator: AdvantageEstimator | None = None,
    on_update: Callable[[int, BatchSummary], None] | None = None,
    loss: LossName = LossName.PPO,
    loss_config: LossConfig | None = None,
    steps_per_batch: int = 1,
) -> ToyLearningResult:
    """Warm start, evaluate on held-out games, train `setup.updates` updates, evaluate again
    (RL updates with `loss` / `loss_config`, default PPO with clip 0.8 / 1.2; each batch takes
    `steps_per_batch` optimizer steps, so from the second on the batch is off-policy)."""
    protocol = PlainCommands()
    renderer = ChatRenderer(tokenizer)
    estimator = estimator or GroupMean()

    def config(group: int, seed: int | None = None) -> RolloutConfig:
        return RolloutConfig(
            group_size=group,
            max_env_steps=setup.env_steps,
            max_assistant_tokens=16,
            max_trajectory_tokens=1500,
            sampling=SamplingParams(temperature=1.0, seed=seed),
        )

    async def rollouts(
        sampler: Sampler, tasks: list[TaskInfo], cfg: RolloutConfig
    ) -> list[TrajectoryGroup]:
        return await rollout_batch(
            tasks,
            env_factory=make_toy_group,
            sampler=sampler,
            renderer=renderer,
            protocol=protocol,
            config=cfg,
        )

    demo_sampler = PolicySampler(tokenizer, uniform_command_policy(setup.seed))
    demo_groups = await rollouts(demo_sampler, toy_tasks(setup.demos, seed=1000), config(1))
    demos = [
        trajectory_to_datum(t, [1.0] * len(t.turns)) for g in demo_groups for t in g.trajectories
    ]
    backend = LocalBackend.tiny(
        tokenizer, seed=setup.seed, device="cpu", lora=LoraSpec(rank=32, alpha=64)
    )
    for _ in range(setup.sft_steps):
        await backend.forward_backward(demos, LossName.CROSS_ENTROPY, LossConfig())
        await backend.optim_step(AdamParams(learning_rate=setup.sft_learning_rate))
    sampler = await backend.sampler()
    held_out = toy_tasks(setup.eval_games, seed=5000)
    evaluation = config(setup.eval_group, seed=123)
    before = BatchSummary.of(await rollouts(sampler, held_out, evaluation))
    history: list[BatchSummary] = []
    adam = AdamParams(learning_rate=setup.rl_learning_rate, grad_clip_norm=1.0)
    for update in range(setup.updates):
        tasks = toy_tasks(setup.games_per_update, seed=update * setup.games_per_update)
        groups = await rollouts(sampler, tasks, config(setup.group_size))
        advantages = estimator.estimate(groups)
        summary = BatchSummary.of(groups, advantages.degenerate_groups)
        history.append(summary)
        if on_update is not None:
            on_update(update, summary)
        datums = build_datums(groups, advantages)
        for _ in range(steps_per_batch if datums else 0):
            await backend.forward_backward(datums, loss, loss_config or LossConfig(0.8, 1.2))
            await backend.optim_step(adam)
    after = BatchSummary.of(await rollouts(sampler, held_out, evaluation))
    return ToyLearningResult(before=before, after=after, history=tuple(history))


def plot_learning_curves(
    results: dict[str, ToyLearningResult], path: Path, *, legend_fontsize: float | None = None
) -> None:
    """Training-batch reward and success per update, one line per run (a PNG at `path`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4))
    FigureCanvasAgg(figure)
    reward_axes, success_axes = figure.subplots(1, 2)
    for name, result in results.items():
        updates = range(1, len(result.history) + 1)
        reward_axes.plot(updates, [h.reward for h in result.history], marker="o", label=name)
        success_axes.plot(updates, [h.success for h in result.history], marker="o", label=name)
    reward_axes.set(title="mean reward (training batch)", xlabel="update")
    success_axes.set(title="success rate (training batch)", xlabel="update")
    reward_axes.legend(fontsize=legend_fontsize)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
