"""The ALFWorld from-scratch recipe: imitation of an exploring expert, then RL by the Trainer.

Shared by `benchmarks/alfworld_from_scratch.py` (the `gpu`, `cpu` and `cpu-smoke` presets,
results, the last line), `benchmarks/alfworld_cpu.py` (the `cpu` preset over seeds) and their
smoke tests. A small Qwen3-architecture model, randomly initialised,
learns to play generated ALFWorld games, everything the library's own:

1. games: `generate_games` writes verified train and valid_unseen games (unseen floor plans);
2. demonstrations: the exploring expert (`agentrl.envs.alfworld.explorer`), which sees only
   what the agent sees (goal, observations) and searches receptacles until it finds the
   object, plays every train game through the rollout engine, an `EnvWorkerPool` and the
   ALFWorld tool protocol: real `alfworld_step` tool calls (Qwen's XML form) and no
   admissible-action lists, so prompts stay short and every command must be written, not
   copied from a list. Every episode is a demonstration, also one cut at the step limit (the
   moves are still the explorer's). With `relabeled_copies` the explorer also plays that
   many relabelled copies of each train game (`agentrl.envs.alfworld.relabel`: instance
   numbers permuted, the room's listing shuffled), so the demonstrations stop being a few
   dozen rooms to memorise. With `context_window` every prompt holds only the first messages
   and the last turns (all phases alike); the explorer, which reads the whole history, plays
   each episode with it, then the episode is played again under the window reply for reply
   (`agentrl.rollout.replay`);
3. a byte-level BPE tokenizer of the project's own is trained on rendered explorer episodes
   (`agentrl.recipes.tokenizer.bpe_tokenizer`, Qwen3-style chat template);
4. imitation: cross-entropy steps on the demonstrations (`trajectory_to_datums`: assistant
   tokens only, one datum per segment) with `LocalBackend.tiny(..., full_finetune=True)`;
5. success on the valid_unseen games (at `eval_temperature`, draws keyed by seed, game, branch
   and turn) before RL, beside the planner's on the same games (the ceiling); every evaluation
   is written as an eval JSONL file (`scratch_eval_files`);
6. RL: `Trainer` updates (`ScratchSetup.estimator`: GroupMean or GiGPO advantages, PPO,
   reward 1[won] - 0.1 x invalid actions);
7. success on the same valid_unseen games after RL (and every `eval_every` updates during it:
   `ScratchResult.curve`, plotted by `write_results`); the model is saved as `update-NNNN`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from agentrl.algo.datums import Datum, trajectory_to_datums
from agentrl.algo.loss_config import LossNormalisation
from agentrl.algo.rewards import WinMinusInvalid
from agentrl.algo.schedule import LRSchedule, scheduled_learning_rate
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    LossConfig,
    LossName,
    Sampler,
    SamplingParams,
)
from agentrl.chat import ChatRenderer
from agentrl.config.names import EstimatorName
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.alfworld import AlfworldEnvOptions, EnvWorkerPool, alfworld_group_factory
from agentrl.envs.alfworld.baseline import planner_player
from agentrl.envs.alfworld.data import TASK_TYPES, find_games
from agentrl.envs.alfworld.explorer import (
    ExplorerNoise,
    SearchOrder,
    explorer_policy,
    observations_in,
)
from agentrl.envs.alfworld.generate import generate_games
from agentrl.envs.alfworld.relabel import RELABEL_NUMBERS, RelabelingFactory, relabeled_tasks
from agentrl.envs.alfworld.tools import alfworld_plain_protocol, alfworld_tool_protocol
from agentrl.executors.process import default_workers
from agentrl.recipes.tokenizer import bpe_tokenizer
from agentrl.reporting.sinks import JsonlSink, MetricSink
from agentrl.rollout import (
    ContextPolicy,
    FullHistory,
    RecentTurns,
    RecordingSampler,
    ReplaySampler,
    RolloutConfig,
    rollout_batch,
)
from agentrl.tools import CommandTool
from agentrl.tools.command import PlainCommandProtocol

if TYPE_CHECKING:
    from agentrl.config import TrainConfig

__all__ = [
    "CPU",
    "CPU_SMOKE",
    "GPU",
    "IMITATION",
    "IMITATION_RECORD",
    "PLANNER",
    "PRESETS",
    "RL_FIELDS",
    "CurvePoint",
    "Imitation",
    "Score",
    "ScratchProtocol",
    "ScratchResult",
    "ScratchSetup",
    "ScratchTasks",
    "add_format_arguments",
    "context_policy",
    "demo_noise",
    "demonstration_datums",
    "demonstrations",
    "format_overrides",
    "generate_scratch_games",
    "imitation_batches",
    "imitation_dir",
    "imitation_key",
    "imitation_learning_rate",
    "imitation_loss",
    "plot_scratch",
    "result_markdown",
    "rl_config",
    "run_scratch",
    "save_imitation",
    "saved_imitation",
    "scratch_eval_files",
    "scratch_protocol",
    "scratch_tasks",
    "write_results",
]


ScratchProtocol = Literal["tool", "plain", "plain-task", "plain-actions", "plain-local"]
"""The recipe's protocols by name (`scratch_protocol`)."""


@dataclass(frozen=True)
class ScratchSetup:
    """One run (every random draw fixed by `seed`); defaults: the `gpu` preset."""

    train_games: int = 640
    eval_games: int = 64
    """Generated valid_unseen games (floor plans train never uses)."""
    task_types: tuple[str, ...] = TASK_TYPES
    """The task types of the generated games (all six by default)."""
    max_receptacles: int | None = None
    """Only floor plans with at most this many receptacles (`scene_pool`; None: every one)."""
    corpus_games: int = 48
    """Train games whose rendered explorer episodes train the tokenizer."""
    vocab_size: int = 2048
    """At most: 48 games' text fill about 1,100 tokens (every word of the games is one)."""
    hidden_size: int = 512
    layers: int = 8
    heads: int = 8
    kv_heads: int = 4
    rope_theta: float = 10_000.0
    protocol: ScratchProtocol = "tool"
    """"tool": the recipe's `alfworld_step` calls; "plain": the reply is the command itself,
    observations only (`alfworld_plain_protocol`, under half the tokens); "plain-task": plain
    with the goal restated in every tool message; "plain-actions": plain-task with the
    admissible commands listed in every message (the recipe's optional lists); "plain-local":
    plain-actions without the `go to` commands in the lists (the receptacles are named in the
    first observation; a row is ~35% fewer tokens, its attention ~60% less)."""
    search_order: SearchOrder = "surfaces_first"
    """The explorer's search order (`agentrl.envs.alfworld.explorer.SearchOrder`)."""
    relabeled_copies: int = 0
    """Relabelled copies of each train game (`agentrl.envs.alfworld.relabel`) the explorer
    also plays for the demonstrations and the tokenizer's corpus; evaluation and RL play
    games as they are."""
    relabel_numbers: int = RELABEL_NUMBERS
    """A copy's instance numbers are a permutation of 1..this (`Relabel.numbers`)."""
    demo_noise: float = 0.0
    """Share of the demonstrations' turns where the explorer plays a deliberate mistake
    (`ExplorerNoise`, keyed by `seed`), left out of the imitation targets: the model is shown
    how to carry on after a wrong or impossible command. 0: none."""
    rl_games: int = 0
    """Train games kept out of the demonstrations for RL to play (generated on the train
    floor plans beside the `train_games`, chosen by `seed`): the reward then pays for playing
    games the model has not seen solved, as the held-out ones are, not for recalling the
    demonstrated ones. 0: RL plays the demonstrated train games."""
    max_steps: int = 50
    """Replies per episode (the recipe's 50; the explorer needs 13 on average)."""
    max_reply_tokens: int = 48
    """A call is about 25 tokens of the project tokenizer."""
    max_trajectory_tokens: int = 6144
    """About 300 tokens of system prompt and first observation, then about 95 per turn."""
    context_window: int | None = None
    """The last this many turns in every prompt, after the first messages (`RecentTurns`,
    with `context_slack`), for the demonstrations, evaluation and RL alike; None: the whole
    history in every prompt (the recipe's). The explorer reads the whole history, so its
    episodes are played again under the window reply for reply (`ReplaySampler`): the model
    imitates them from the prompts it will act from."""
    context_slack: int = 0
    """Turns a prompt may grow by past `context_window` before it is cut back to it (a cut,
    a new training segment, once every `context_slack + 1` turns)."""
    sft_steps: int = 500
    sft_batch: int = 32
    """Episodes per imitation step (`sft_segments`: segments)."""
    sft_segments: bool = False
    """Imitation batches of `sft_batch` segments drawn from every demonstration's segments
    (under a context window an episode is several), instead of `sft_batch` whole episodes:
    a step reads fewer, like-sized rows."""
    sft_context_weight: float = 0.0
    """Imitation also predicts the environment's text (first observation, tool messages) at
    this cross-entropy weight beside the replies' (`trajectory_to_datums(context_weight=)`),
    the sum divided by the step's reply tokens alone; 0: the replies only."""
    sft_learning_rate: float = 1e-3
    sft_schedule: LRSchedule = LRSchedule.CONSTANT
    """How the imitation rate moves from `sft_learning_rate` to `sft_final_learning_rate`
    over the `sft_steps` (`agentrl.algo.schedule`)."""
    sft_final_learning_rate: float = 0.0
    updates: int = 10
    games_per_batch: int = 16
    group_size: int = 8
    estimator: EstimatorName = EstimatorName.GROUP_MEAN
    """The RL phase's advantage estimator: the recipe's `group_mean` (reward minus the group's
    mean, on every token of the episode), or `gigpo` (that plus, per turn, the discounted
    return minus the mean of the group's turns that acted from the same game state:
    `agentrl.algo.advantages.GiGPO`, the reward's per-turn form)."""
    learning_rate: float = 1e-4
    rl_schedule: LRSchedule = LRSchedule.CONSTANT
    """How the RL rate moves from `learning_rate` over the `updates` (the Trainer's
    `lr_schedule`): constant stays, linear and cosine decay to `rl_final_learning_rate`."""
    rl_final_learning_rate: float | None = None
    """Where a decaying RL rate ends (None: a tenth of `learning_rate`, the Trainer's)."""
    optim_substeps: int = 1
    """Optimizer steps per RL update, each on a share of its trajectories (the Trainer's
    `optim_substeps`): more steps for the same rollouts, PPO's clip bounding how far they move
    the sampled tokens' probabilities."""
    kl_coef: float = 0.0
    """Weight of the RL loss's KL penalty to the imitated model (a frozen copy taken when
    imitation ends, `LocalBackend.freeze_reference`; the Trainer's `kl_coef`, k3 estimate); 0:
    none, the recipe's."""
    rl_temperature: float = 1.0
    """Sampling temperature of the RL rollouts (below 1: the sharper policy a small model's
    greedy play resembles; the trained logprobs stay those of the model, temperature 1)."""
    eval_every: int = 0
    """Held-out success also every this many RL updates (`ScratchResult.curve`); 0: before
    and after RL only."""
    eval_samples: int = 2
    eval_temperature: float = 1.0
    """1: the model's own distribution (draws keyed by seed, game, branch and turn); 0: greedy."""
    device: str = "cuda"
    micro_batch_tokens: int = 65_536
    max_batch_rows: int = 256
    env_workers: int = 0
    """Persistent env worker processes (0: one per CPU)."""
    torch_threads: int = 0
    """CPU threads of torch (0: torch's default)."""
    concurrent_games: int = 128
    """Games played at once (each holds its engines in a worker)."""
    seed: int = 0

    def __post_init__(self) -> None:
        # checked here, not when the phase that uses them starts: after minutes of imitation
        if not 0.0 <= self.demo_noise < 1.0:
            raise ValueError(f"ScratchSetup.demo_noise must be in [0, 1), got {self.demo_noise}")
        if self.kl_coef < 0:
            raise ValueError(f"ScratchSetup.kl_coef must be >= 0, got {self.kl_coef}")
        if self.sft_context_weight < 0:
            raise ValueError(
                f"ScratchSetup.sft_context_weight must be >= 0, got {self.sft_context_weight}"
            )
        if self.rl_final_learning_rate is not None and (
            self.rl_final_learning_rate <= 0 or LRSchedule(self.rl_schedule) is LRSchedule.CONSTANT
        ):
            raise ValueError(
                f"ScratchSetup.rl_final_learning_rate ({self.rl_final_learning_rate}) must be > 0 "
                "and is the end of a decaying rate: set rl_schedule to linear or cosine, or "
                "leave it None"
            )
        if self.eval_every < 0:
            raise ValueError(f"ScratchSetup.eval_every must be >= 0, got {self.eval_every}")
        if self.optim_substeps < 1:
            raise ValueError(f"ScratchSetup.optim_substeps must be >= 1, got {self.optim_substeps}")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError(
                f"ScratchSetup.context_window must be >= 1 or None (the whole history), got "
                f"{self.context_window}"
            )
        if self.context_slack < 0 or (self.context_slack and self.context_window is None):
            raise ValueError(
                f"ScratchSetup.context_slack ({self.context_slack}) must be >= 0 and needs a "
                "context_window: the slack is how far a windowed prompt grows before its cut"
            )


GPU = ScratchSetup()
"""Sized for <= 10 minutes on one H200 (bf16); see docs/alfworld.md for the estimate."""
CPU_SMOKE = replace(
    ScratchSetup(),
    train_games=4,
    rl_games=2,
    eval_games=2,
    corpus_games=6,
    hidden_size=64,
    layers=2,
    heads=4,
    kv_heads=2,
    max_steps=12,
    sft_steps=4,
    sft_batch=4,
    updates=1,
    games_per_batch=2,
    group_size=2,
    eval_samples=1,
    device="cpu",
    micro_batch_tokens=8192,
    max_batch_rows=64,
    env_workers=2,
    torch_threads=1,
)
"""Plumbing only (about a minute on 2 CPU cores): the smoke test's size (4 games
demonstrated, 2 kept for RL)."""
CPU = replace(
    ScratchSetup(),
    train_games=240,
    rl_games=80,
    eval_games=96,
    task_types=("pick_and_place_simple",),
    max_receptacles=13,
    hidden_size=64,
    layers=4,
    heads=4,
    kv_heads=2,
    protocol="plain-local",
    search_order="listed",
    context_window=2,
    context_slack=2,
    relabeled_copies=4,
    demo_noise=0.15,
    max_steps=30,
    max_trajectory_tokens=4096,
    sft_steps=600,
    sft_batch=16,
    sft_context_weight=0.1,
    sft_learning_rate=3e-3,
    updates=16,
    games_per_batch=8,
    group_size=8,
    estimator=EstimatorName.GIGPO,
    learning_rate=3e-4,
    rl_schedule=LRSchedule.COSINE,
    optim_substeps=4,
    kl_coef=0.2,
    rl_temperature=0.5,
    eval_samples=1,
    eval_temperature=0.0,
    device="cpu",
    micro_batch_tokens=16_384,
    max_batch_rows=64,
    env_workers=2,
    torch_threads=2,
    concurrent_games=64,
)
"""The miniature for 2 CPU cores (`benchmarks/alfworld_cpu.py`): "put" games in the small
rooms (at most 13 receptacles: bathrooms, bedrooms, small living rooms), a 0.24M-parameter
model, 30 steps per episode, the plain protocol with the goal restated in every tool message
and the commands that act where the agent stands listed (`plain-local`: the `go to` lines
left out), prompts cut to the last 2 turns (plus a slack of 2) after the first observation,
and the listed search order; the demonstrations are 240 train games and 4 relabelled copies
of each (numbers 1..9), with 15% of their turns played as deliberate mistakes that are not
imitated (`demo_noise`), 600 imitation steps that also predict the environment's text at a
tenth of the replies' weight (`sft_context_weight`); RL plays 80 other train games (never
demonstrated) at temperature 0.5 for 16 updates of GiGPO (the group-mean advantage plus a
per-turn one among turns from the same game state), 4 optimizer steps an update at a rate
falling from 3e-4 to 3e-5 on a cosine, and a KL penalty (0.2) to the imitated model;
evaluation is greedy on 96 valid_unseen games. Measured in docs/alfworld.md."""
PRESETS = {"gpu": GPU, "cpu": CPU, "cpu-smoke": CPU_SMOKE}
RECORDING_TRAJECTORY_TOKENS = 1 << 24
"""The token budget of the explorer's whole-history pass under a context window (no model
reads those prompts: the window's replay is what the model learns from)."""
BYTE_BUDGET = (512, 131_072)
"""Reply and trajectory tokens of the tokenizer's corpus episodes (byte-level tokens)."""


@dataclass(frozen=True)
class Score:
    """Success of one policy on a set of games."""

    success: float
    episodes: int
    turns_per_episode: float
    invalid_per_turn: float
    invalid_per_episode: float
    tokens_per_episode: float
    seconds: float


@dataclass(frozen=True)
class CurvePoint:
    """Held-out success after `update` RL updates (0: the imitated model)."""

    update: int
    score: Score


@dataclass
class ScratchResult:
    """What one run measured (written to `result.json`)."""

    setup: ScratchSetup
    device: str
    explorer_train: Score
    explorer_eval: Score
    before_rl: Score
    after_rl: Score
    train_success: list[float] = field(default_factory=list)
    demos: int = 0
    demo_tokens: int = 0
    sft_tokens: int = 0
    sft_loss: list[float] = field(default_factory=list)
    parameters: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase, and `total`."""
    cpu_seconds: float = 0.0
    """CPU seconds of this process (the env workers' are not counted)."""
    imitation_reused: bool = False
    """The imitated model was loaded from an earlier run's save (`imitated`), not trained."""
    planner_eval: Score | None = None
    """The planner (it reads the game's solution: the ceiling) on the valid_unseen games."""
    curve: list[CurvePoint] = field(default_factory=list)
    """Held-out success before RL, every `eval_every` updates, and after RL."""
    eval_files: list[str] = field(default_factory=list)
    """The evaluations' JSONL files (`agentrl.evaluation` format: every episode, summaries):
    the planner's, the imitated model's and the model's after RL (`scratch_eval_files`)."""


def _score(groups: list[TrajectoryGroup], seconds: float) -> Score:
    trajectories = [t for g in groups for t in g.trajectories]
    turns = [turn for t in trajectories for turn in t.turns]
    tokens = [
        len(t.turns[-1].prompt_tokens) + len(t.turns[-1].completion_tokens)
        for t in trajectories
        if t.turns
    ]
    return Score(
        success=float(np.mean([t.won for t in trajectories])),
        episodes=len(trajectories),
        turns_per_episode=len(turns) / max(1, len(trajectories)),
        invalid_per_turn=float(np.mean([turn.invalid for turn in turns])) if turns else 0.0,
        invalid_per_episode=sum(turn.invalid for turn in turns) / max(1, len(trajectories)),
        tokens_per_episode=float(np.mean(tokens)) if tokens else 0.0,
        seconds=seconds,
    )


def generate_scratch_games(setup: ScratchSetup, root: Path) -> Path:
    """The run's verified train and valid_unseen games, generated into `root` (resumed when
    already there; seeded by `setup.seed`; each walkthrough played by the fast engine, the one
    the recipe's env plays with); returns `root`."""
    generate_games(
        root,
        train=setup.train_games + setup.rl_games,
        valid_unseen=setup.eval_games,
        seed=setup.seed,
        task_types=setup.task_types,
        max_receptacles=setup.max_receptacles,
        workers=setup.env_workers or default_workers(),
        progress=False,
        verify_engine="fast",  # the engine the recipe's env plays with
    )
    return root


@dataclass(frozen=True)
class ScratchTasks:
    """The run's games: demonstrated, kept for RL, held out."""

    train: list[TaskInfo]
    rl: list[TaskInfo]
    held_out: list[TaskInfo]


def scratch_tasks(setup: ScratchSetup, out: Path, data_root: Path | None) -> ScratchTasks:
    """The games of `data_root` (generated into `out/games` when None): the first
    `train_games + rl_games` train games, of which `rl_games` (a draw keyed by `seed`) are
    kept for RL, and the first `eval_games` valid_unseen games. Refuses a folder with too few."""
    if setup.rl_games < 0:
        raise ValueError(f"ScratchSetup.rl_games must be >= 0, got {setup.rl_games}")
    if data_root is None:
        data_root = generate_scratch_games(setup, out / "games")
    needed = setup.train_games + setup.rl_games
    pool = [g.to_task() for g in find_games(data_root, ["train"])][:needed]
    held_out = [g.to_task() for g in find_games(data_root, ["valid_unseen"])][: setup.eval_games]
    if len(pool) < needed or len(held_out) < setup.eval_games:
        raise ValueError(
            f"{data_root} holds {len(pool)} train and {len(held_out)} valid_unseen games; the "
            f"setup needs {needed} train (train_games {setup.train_games} + rl_games "
            f"{setup.rl_games}) and {setup.eval_games} valid_unseen: generate them there "
            "(generate_scratch_games) or leave the data root out"
        )
    kept = set(random.Random(f"rl-games-{setup.seed}").sample(range(needed), setup.rl_games))
    return ScratchTasks(
        train=[t for i, t in enumerate(pool) if i not in kept],
        rl=[t for i, t in enumerate(pool) if i in kept],
        held_out=held_out,
    )


def add_format_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmarks' `--protocol`, `--search-order`, `--relabeled-copies`, `--demo-noise`,
    `--sft-learning-rate`, `--sft-segments`, `--sft-context-weight`, `--sft-schedule`,
    `--kl-coef`, `--rl-learning-rate`, `--rl-schedule`, `--optim-substeps`, `--estimator`,
    `--rl-temperature`, `--eval-every`, `--context-window` and `--context-slack` (overrides of
    the preset's `ScratchSetup.protocol` / `search_order` / `relabeled_copies` / `demo_noise` /
    `sft_learning_rate` / `sft_segments` / `sft_context_weight` / `sft_schedule` / `kl_coef` /
    `learning_rate` / `rl_schedule` / `optim_substeps` / `estimator` / `rl_temperature` /
    `eval_every` /
    `context_window` (0: None, the whole history) / `context_slack`; None: the preset's;
    `format_overrides` applies them)."""
    parser.add_argument(
        "--protocol",
        choices=get_args(ScratchProtocol),
        default=None,
        help="tool: alfworld_step calls; plain: the reply is the command; plain-task: plain, "
        "the goal restated in every tool message; plain-actions: plain-task with the "
        "executable commands listed; plain-local: plain-actions without the go-to commands "
        "(default: the preset's)",
    )
    parser.add_argument(
        "--search-order",
        choices=get_args(SearchOrder),
        default=None,
        help="the explorer's search order (default: the preset's)",
    )
    parser.add_argument(
        "--relabeled-copies",
        type=int,
        default=None,
        help="relabelled copies of each train game in the demonstrations (default: preset's)",
    )
    parser.add_argument(
        "--demo-noise",
        type=float,
        default=None,
        help="share of demonstration turns played as deliberate mistakes, not imitated "
        "(default: the preset's)",
    )
    parser.add_argument(
        "--sft-learning-rate",
        type=float,
        default=None,
        help="the imitation phase's (first) learning rate (default: the preset's)",
    )
    parser.add_argument(
        "--sft-context-weight",
        type=float,
        default=None,
        metavar="W",
        help="imitation also predicts the environment's text at this weight beside the "
        "replies (0: replies only; default: the preset's)",
    )
    parser.add_argument(
        "--sft-segments",
        action="store_true",
        default=None,
        help="imitation batches of segments drawn from every demonstration, not whole "
        "episodes (default: the preset's)",
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=None,
        metavar="N",
        help="held-out success also every N RL updates, for the curve (default: the preset's)",
    )
    parser.add_argument(
        "--sft-schedule",
        choices=[schedule.value for schedule in LRSchedule],
        default=None,
        help="how the imitation rate moves from --sft-learning-rate over the imitation steps: "
        "constant stays, linear and cosine decay to ScratchSetup.sft_final_learning_rate "
        "(0 in the presets) (default: the preset's)",
    )
    parser.add_argument(
        "--kl-coef",
        type=float,
        default=None,
        help="RL's KL penalty to the imitated model (default: the preset's)",
    )
    parser.add_argument(
        "--rl-learning-rate",
        type=float,
        default=None,
        help="the RL phase's learning rate (default: the preset's)",
    )
    parser.add_argument(
        "--rl-schedule",
        choices=[schedule.value for schedule in LRSchedule],
        default=None,
        help="how the RL rate moves from --rl-learning-rate over the updates: constant stays, "
        "linear and cosine decay to a tenth of it (default: the preset's)",
    )
    parser.add_argument(
        "--optim-substeps",
        type=int,
        default=None,
        help="optimizer steps per RL update, each on a share of its trajectories "
        "(default: the preset's)",
    )
    parser.add_argument(
        "--estimator",
        choices=[EstimatorName.GROUP_MEAN.value, EstimatorName.GIGPO.value],
        default=None,
        help="the RL phase's advantage estimator (default: the preset's)",
    )
    parser.add_argument(
        "--rl-temperature",
        type=float,
        default=None,
        help="the RL rollouts' sampling temperature (default: the preset's)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        metavar="N",
        help="the last N turns in every prompt after the first messages, for demonstrations, "
        "evaluation and RL; 0: the whole history (default: the preset's)",
    )
    parser.add_argument(
        "--context-slack",
        type=int,
        default=None,
        help="turns a windowed prompt grows by before it is cut back (default: the preset's)",
    )


def format_overrides(setup: ScratchSetup, args: argparse.Namespace) -> ScratchSetup:
    """`setup` with the `add_format_arguments` options that were given."""
    if args.relabeled_copies is not None and args.relabeled_copies < 0:
        raise SystemExit(f"--relabeled-copies must be >= 0, got {args.relabeled_copies}")
    if args.rl_learning_rate is not None and args.rl_learning_rate <= 0:
        raise SystemExit(f"--rl-learning-rate must be > 0, got {args.rl_learning_rate}")
    if args.sft_learning_rate is not None and args.sft_learning_rate <= 0:
        raise SystemExit(f"--sft-learning-rate must be > 0, got {args.sft_learning_rate}")
    if args.rl_temperature is not None and args.rl_temperature <= 0:
        raise SystemExit(f"--rl-temperature must be > 0, got {args.rl_temperature}")
    if args.context_window is not None and args.context_window < 0:
        raise SystemExit(
            f"--context-window must be >= 0 (0: the whole history), got {args.context_window}"
        )
    given = {
        "protocol": args.protocol,
        "search_order": args.search_order,
        "relabeled_copies": args.relabeled_copies,
        "estimator": None if args.estimator is None else EstimatorName(args.estimator),
        "learning_rate": args.rl_learning_rate,
        "demo_noise": args.demo_noise,
        "sft_learning_rate": args.sft_learning_rate,
        "sft_schedule": None if args.sft_schedule is None else LRSchedule(args.sft_schedule),
        "kl_coef": args.kl_coef,
        "rl_schedule": None if args.rl_schedule is None else LRSchedule(args.rl_schedule),
        "optim_substeps": args.optim_substeps,
        "context_slack": args.context_slack,
        "rl_temperature": args.rl_temperature,
        "sft_segments": args.sft_segments,
        "sft_context_weight": args.sft_context_weight,
        "eval_every": args.eval_every,
    }
    changes = {k: v for k, v in given.items() if v is not None}
    if args.context_window is not None:
        changes["context_window"] = args.context_window or None
    try:  # `ScratchSetup` checks the ranges (its error names the field: --demo-noise ...)
        setup = replace(setup, **changes)
    except ValueError as error:
        raise SystemExit(str(error)) from None
    return setup


def scratch_protocol(name: ScratchProtocol) -> CommandTool | PlainCommandProtocol:
    """The recipe's protocol by name: "tool" (`alfworld_step` calls, no action lists),
    "plain" (`alfworld_plain_protocol`), "plain-task" (the same, the goal restated in every
    tool message), "plain-actions" (plain-task, the admissible commands listed in every
    message) or "plain-local" (plain-actions, the `go to` commands left out of the lists)."""
    if name == "tool":
        return alfworld_tool_protocol(include_admissible=False)
    if name == "plain":
        return alfworld_plain_protocol()
    if name == "plain-task":
        return alfworld_plain_protocol(restate_task=True)
    if name == "plain-actions":
        return alfworld_plain_protocol(restate_task=True, include_admissible=True)
    if name == "plain-local":
        return alfworld_plain_protocol(restate_task=True, include_admissible=True, list_moves=False)
    raise ValueError(
        f"ScratchSetup.protocol must be one of {', '.join(map(repr, get_args(ScratchProtocol)))}"
        f", got {name!r}"
    )


class _Run:
    """The run's shared pieces: the protocol and the env factory (with its worker pool)."""

    def __init__(self, setup: ScratchSetup) -> None:
        self.setup = setup
        self.protocol = scratch_protocol(setup.protocol)
        pool = EnvWorkerPool(setup.env_workers or None)
        games = alfworld_group_factory(AlfworldEnvOptions(max_steps=setup.max_steps), pool)
        self.factory = RelabelingFactory(games, setup.seed, setup.relabel_numbers)
        """Plays a copy named by `relabeled_tasks` through its renaming, any game as it is."""

    async def play(
        self,
        sampler: Sampler,
        tokenizer: Any,
        tasks: list[TaskInfo],
        group: int,
        budget: tuple[int, int] | None = None,
        context: ContextPolicy | None = None,
    ) -> tuple[list[TrajectoryGroup], Score]:
        """Every task played `group` times by `sampler` (at `eval_temperature`), within the run's
        token budgets (or `budget`: reply and trajectory tokens), under the setup's context
        policy (or `context`)."""
        started = time.perf_counter()
        groups = await rollout_batch(
            tasks,
            env_factory=self.factory,
            sampler=sampler,
            renderer=ChatRenderer(tokenizer, self.protocol.tools),
            protocol=self.protocol,
            config=self._rollout(group, budget, context),
            max_concurrent_groups=min(len(tasks), self.setup.concurrent_games),
        )
        return groups, _score(groups, time.perf_counter() - started)

    def _rollout(
        self, group: int, budget: tuple[int, int] | None, context: ContextPolicy | None
    ) -> RolloutConfig:
        reply, trajectory = budget or (
            self.setup.max_reply_tokens,
            self.setup.max_trajectory_tokens,
        )
        return RolloutConfig(
            group_size=group,
            max_env_steps=self.setup.max_steps,
            max_assistant_tokens=reply,
            max_trajectory_tokens=trajectory,
            # keyed draws (seed, game, branch, turn): the same games play the same way
            # whatever order the env workers answer in
            sampling=SamplingParams(temperature=self.setup.eval_temperature, seed=self.setup.seed),
            context=context or context_policy(self.setup),
        )

    async def evaluate(
        self, backend: Any, tokenizer: Any, tasks: list[TaskInfo]
    ) -> tuple[list[TrajectoryGroup], Score]:
        """The backend's current model on `tasks`, `eval_samples` episodes each."""
        return await self.play(await backend.sampler(), tokenizer, tasks, self.setup.eval_samples)

    async def plan(
        self, tokenizer: Any, tasks: list[TaskInfo]
    ) -> tuple[list[TrajectoryGroup], Score]:
        """Every task played once by the planner (`planner_player`: it reads the game's
        solution, the ceiling) within the run's step limit, under the run's context policy
        and token budgets as the model plays."""
        started = time.perf_counter()
        play = planner_player(
            env_factory=self.factory,
            renderer=ChatRenderer(tokenizer, self.protocol.tools),
            protocol=self.protocol,
            rollout=self._rollout(1, None, None),
            reward_fn=WinMinusInvalid(),
        )
        groups = list(await asyncio.gather(*(play(task) for task in tasks)))
        return groups, _score(groups, time.perf_counter() - started)

    async def explore(
        self,
        tokenizer: Any,
        tasks: list[TaskInfo],
        budget: tuple[int, int] | None = None,
        noise: ExplorerNoise | None = None,
        windowed: bool = True,
    ) -> tuple[list[TrajectoryGroup], Score]:
        """The exploring expert's episodes (its calls written in the protocol's form; with
        `noise`, its deliberate mistakes). The explorer reads the whole history; under the
        setup's context window (and `windowed`) its episodes are then played again under the
        window, reply for reply, and those are returned (the score is the explorer's own)."""
        from agentrl.testing import PolicySampler

        policy = explorer_policy(self.protocol.call_text, self.setup.search_order, noise)
        sampler = PolicySampler(tokenizer, policy)
        if not windowed or self.setup.context_window is None:
            return await self.play(sampler, tokenizer, tasks, 1, budget, FullHistory())
        recording = RecordingSampler(sampler)
        # the whole history only records the explorer's replies (no model reads it), so only
        # the step limit cuts it: the replay under the window must never outrun its recording
        reply = budget[0] if budget else self.setup.max_reply_tokens
        recorded_budget = (reply, RECORDING_TRAJECTORY_TOKENS)
        played, score = await self.play(
            recording, tokenizer, tasks, 1, recorded_budget, FullHistory()
        )
        groups, _ = await self.play(ReplaySampler(recording.replies), tokenizer, tasks, 1, budget)
        for whole, cut in zip(played, groups, strict=True):
            recorded, replayed = whole.trajectories[0], cut.trajectories[0]
            if len(replayed.turns) != len(recorded.turns) or replayed.won != recorded.won:
                raise RuntimeError(
                    f"game {whole.task.task_id}: the explorer's episode played again under the "
                    f"context window took {len(replayed.turns)} turns (won: {replayed.won}), "
                    f"recorded {len(recorded.turns)} (won: {recorded.won}); "
                    f"{replayed.error or replayed.stop_reason.value}"
                )
        return groups, score


def context_policy(setup: ScratchSetup) -> ContextPolicy:
    """The prompts' context policy: `RecentTurns(context_window, context_slack)`, or the whole
    history (`FullHistory`) without a window."""
    if setup.context_window is None:
        return FullHistory()
    return RecentTurns(setup.context_window, setup.context_slack)


def demo_noise(setup: ScratchSetup) -> ExplorerNoise | None:
    """The demonstrations' `ExplorerNoise` (None when `setup.demo_noise` is 0)."""
    return ExplorerNoise(setup.demo_noise, setup.seed) if setup.demo_noise else None


def demonstration_datums(
    groups: list[TrajectoryGroup],
    tokenizer: Any,
    noise: ExplorerNoise | None,
    context_weight: float = 0.0,
) -> list[list[Datum]]:
    """The imitation datums of the explorer's episodes, one list per episode (one datum per
    segment: one, or several under a context window): every reply a target but the mistakes
    `noise` played (context only), and with `context_weight` the environment's text at that
    weight (`trajectory_to_datums`); an episode with no reply target left is dropped."""
    episodes = []
    for trajectory in (t for g in groups for t in g.trajectories if t.turns):
        trained = [True] * len(trajectory.turns)
        if noise is not None:
            first = observations_in(tokenizer.decode(trajectory.turns[0].prompt_tokens))[0]
            trained = [not noise.noisy(first, turn) for turn in range(len(trained))]
        if any(trained):
            advantages = [1.0] * len(trained)
            episodes.append(
                trajectory_to_datums(
                    trajectory, advantages, trained=trained, context_weight=context_weight
                )
            )
    return episodes


async def _project_tokenizer(run: _Run, corpus_games: list[TaskInfo]) -> Any:
    """The project tokenizer (`bpe_tokenizer`, `vocab_size` tokens) trained on the explorer's
    whole-history episodes of `corpus_games`, rendered through a byte-level one."""
    byte_level = bpe_tokenizer([], 0)
    corpus, _ = await run.explore(byte_level, corpus_games, BYTE_BUDGET, windowed=False)
    return bpe_tokenizer(_texts(corpus, byte_level), run.setup.vocab_size)


async def demonstrations(setup: ScratchSetup, tasks: list[TaskInfo]) -> list[list[Datum]]:
    """The imitation datums (`demonstration_datums`) of the explorer's episodes of `tasks`
    under `setup` (its protocol, context window and mistakes), tokenized by a project
    tokenizer trained on the first `setup.corpus_games` of them: what imitation would read
    of these games, to measure its cost (`benchmarks/alfworld_rows.py`) without training."""
    run = _Run(setup)
    try:
        tokenizer = await _project_tokenizer(run, tasks[: setup.corpus_games])
        noise = demo_noise(setup)
        groups, _ = await run.explore(tokenizer, tasks, noise=noise)
    finally:
        await run.factory.close()
    return demonstration_datums(groups, tokenizer, noise, setup.sft_context_weight)


def _texts(groups: list[TrajectoryGroup], tokenizer: Any) -> list[str]:
    """Rendered conversations of the episodes: the tokenizer's corpus."""
    last = [t.turns[-1] for g in groups for t in g.trajectories if t.turns]
    return [tokenizer.decode([*turn.prompt_tokens, *turn.completion_tokens]) for turn in last]


def _backend(setup: ScratchSetup, tokenizer: Any, run_dir: Path) -> Any:
    from agentrl.backends.local import LocalBackend

    shape = {
        "hidden_size": setup.hidden_size,
        "intermediate_size": 3 * setup.hidden_size,
        "num_hidden_layers": setup.layers,
        "num_attention_heads": setup.heads,
        "num_key_value_heads": setup.kv_heads,
        "head_dim": setup.hidden_size // setup.heads,
        "rope_theta": setup.rope_theta,
    }
    return LocalBackend.tiny(
        tokenizer,
        seed=setup.seed,
        device=setup.device,
        full_finetune=True,
        checkpoint_dir=run_dir / "checkpoints",
        model_overrides=shape,
        micro_batch_tokens=setup.micro_batch_tokens,
        max_batch_rows=setup.max_batch_rows,
    )


def imitation_loss(setup: ScratchSetup, batch: list[Datum]) -> LossConfig:
    """The cross-entropy of an imitation step: the summed loss divided by the batch's reply
    tokens (mask 1), so context targets (`sft_context_weight`, masks below 1) add to the sum
    without shrinking the replies' gradient; without them, the default per-token mean (the
    same divisor)."""
    if not setup.sft_context_weight:
        return LossConfig()
    replies = sum(int(np.count_nonzero(d.mask == 1.0)) for d in batch)
    return LossConfig(
        normalisation=LossNormalisation.CONSTANT, norm_constant=float(max(replies, 1))
    )


def imitation_learning_rate(setup: ScratchSetup, step: int) -> float:
    """The rate of imitation step `step` (1-based) of `setup.sft_steps`."""
    return scheduled_learning_rate(
        setup.sft_schedule,
        setup.sft_learning_rate,
        setup.sft_final_learning_rate,
        step,
        setup.sft_steps,
    )


def rl_config(setup: ScratchSetup, run_dir: Path) -> TrainConfig:
    """The RL phase's Trainer config: the recipe's reward and PPO, the setup's estimator,
    sizes, rate and sampling temperature."""
    from agentrl.config import TrainConfig

    return TrainConfig.model_validate(
        dict(
            base_model="tiny",
            backend="local",
            device=setup.device,
            env="alfworld",
            show_admissible=False,
            max_episode_steps=setup.max_steps,
            max_assistant_tokens=setup.max_reply_tokens,
            max_trajectory_tokens=setup.max_trajectory_tokens,
            context_window=setup.context_window,
            context_slack=setup.context_slack,
            max_steps=setup.updates,
            games_per_batch=setup.games_per_batch,
            group_size=setup.group_size,
            learning_rate=setup.learning_rate,
            lr_schedule=setup.rl_schedule,
            final_learning_rate=setup.rl_final_learning_rate,
            optim_substeps=setup.optim_substeps,
            kl_coef=setup.kl_coef,
            temperature=setup.rl_temperature,
            estimator=setup.estimator,
            loss=LossName.PPO,
            seed=setup.seed,
            run_dir=run_dir,
            save_every=setup.updates,
            save_rollouts=False,
        )
    )


def _trainer(
    setup: ScratchSetup,
    run: _Run,
    backend: Any,
    tokenizer: Any,
    tasks: list[TaskInfo],
    run_dir: Path,
    sink: MetricSink,
) -> Any:
    from agentrl.training.trainer import Trainer

    return Trainer(
        config=rl_config(setup, run_dir),
        backend=backend,
        env_factory=run.factory,
        tasks=tasks,
        renderer=ChatRenderer(tokenizer, run.protocol.tools),
        protocol=run.protocol,
        sinks=sink,
        progress=False,
    )


def plot_scratch(result: ScratchResult, path: Path) -> Path:
    """The run's held-out success per RL update (`ScratchResult.curve`), the training batches'
    success, and the planner's and the exploring expert's on the same held-out games."""
    from agentrl.reporting.plots import Level, success_curve_plot

    planner = [Level(result.planner_eval.success, "planner")] if result.planner_eval else []
    explorer = Level(result.explorer_eval.success, "exploring expert", ":", "black")
    return success_curve_plot(
        path,
        held_out=[(p.update, p.score.success) for p in result.curve],
        held_out_label="model (valid_unseen)",
        batches=result.train_success or None,
        batch_label="RL batch (train games)",
        levels=[*planner, explorer],
        title="ALFWorld from scratch: success per RL update",
        xlabel="RL update (0: after imitation)",
        legend="center right",
    )


def write_results(result: ScratchResult, out: Path) -> tuple[Path, ...]:
    """`out/result.json` (every number), `out/result.md` (`result_markdown`) and the plots in
    `out/plots`: the curve (`plot_scratch`) and the evaluations' comparison plots
    (`agentrl.reporting.plots.plot_eval_files`: planner, imitated model, after RL); returns the
    plots."""
    from agentrl.reporting.plots import plot_eval_files

    (out / "result.json").write_text(json.dumps(asdict(result), indent=2))
    (out / "result.md").write_text(result_markdown(result))
    curve = plot_scratch(result, out / "plots" / "alfworld.png")
    return (curve, *plot_eval_files([Path(p) for p in result.eval_files], out / "plots"))


def result_markdown(result: ScratchResult) -> str:
    """The run as a markdown table."""
    played = "train games and copies" if result.setup.relabeled_copies else "train games"
    rows = [
        (f"exploring expert ({played})", result.explorer_train),
        ("exploring expert (valid_unseen)", result.explorer_eval),
        *([("planner (valid_unseen)", result.planner_eval)] if result.planner_eval else []),
        ("model before RL (valid_unseen)", result.before_rl),
        ("model after RL (valid_unseen)", result.after_rl),
    ]
    lines = [
        "| policy | success | episodes | steps / episode | invalid / episode | invalid / turn "
        "| tokens / episode |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {s.success:.3f} | {s.episodes} | {s.turns_per_episode:.1f} | "
            f"{s.invalid_per_episode:.2f} | {s.invalid_per_turn:.3f} | "
            f"{s.tokens_per_episode:.0f} |"
        )
    setup = result.setup
    lines += [
        "",
        f"Model: {result.parameters / 1e6:.2f}M parameters (hidden {setup.hidden_size}, "
        f"{setup.layers} layers), device {result.device}; {result.demos} demonstrations "
        f"({result.demo_tokens} tokens), {setup.sft_steps} imitation steps ({result.sft_tokens} "
        f"tokens), {setup.updates} RL updates of {setup.games_per_batch} x {setup.group_size}; "
        f"games: {', '.join(setup.task_types)}"
        + (f", rooms of <= {setup.max_receptacles} receptacles" if setup.max_receptacles else "")
        + f", <= {setup.max_steps} steps.",
        "",
        "Wall seconds per phase: "
        + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items())
        + f"; CPU seconds of the main process: {result.cpu_seconds:.1f}.",
    ]
    return "\n".join(lines) + "\n"


RL_FIELDS = frozenset(
    {
        "updates",
        "games_per_batch",
        "group_size",
        "estimator",
        "learning_rate",
        "rl_schedule",
        "rl_final_learning_rate",
        "optim_substeps",
        "kl_coef",
        "rl_temperature",
        "eval_every",
        "eval_samples",
        "eval_temperature",
        "env_workers",
        "concurrent_games",
    }
)
"""The `ScratchSetup` fields that only RL and evaluation read: a saved imitated model serves
any run that differs from its own in these alone."""


@dataclass(frozen=True)
class Imitation:
    """What the demonstrations and imitation phases measured (saved beside the model)."""

    explorer_train: Score
    explorer_eval: Score
    demos: int
    demo_tokens: int
    sft_tokens: int
    sft_loss: list[float]
    reused: bool = False
    """Loaded from an earlier run's save (`run_scratch(..., imitated=...)`)."""


def imitation_key(setup: ScratchSetup, games: ScratchTasks) -> dict[str, Any]:
    """What the imitated model depends on, as JSON values: the setup's fields (all but
    `RL_FIELDS`) and the demonstrated games' ids (`demonstrated_games`)."""
    fields = {k: v for k, v in _setup_json(setup).items() if k not in RL_FIELDS}
    return {**fields, "demonstrated_games": [task.task_id for task in games.train]}


def _setup_json(setup: ScratchSetup) -> dict[str, Any]:
    """The setup's fields as JSON values (as `imitation.json` holds them)."""
    loaded: dict[str, Any] = json.loads(json.dumps(asdict(setup), default=str))
    return loaded


def imitation_dir(out: Path) -> Path:
    """Where `run_scratch` saves the imitated model of a run written to `out`."""
    return out / "run" / "checkpoints" / IMITATION


IMITATION = "imitation"
"""The imitated model's checkpoint name."""
IMITATION_RECORD = "imitation.json"
"""Beside the imitated model: its `imitation_key` and the phase's measurements."""


async def save_imitation(key: dict[str, Any], backend: Any, imitation: Imitation) -> None:
    """Save the backend's weights and optimizer as its checkpoint `IMITATION`, with
    `IMITATION_RECORD` (`key`, from `imitation_key`, and the phase's measurements) written
    last."""
    ref = await backend.save(IMITATION)
    record = {"key": key, **asdict(replace(imitation, reused=False))}
    path = Path(ref.state_path).parent / IMITATION_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=2))
    partial.replace(path)  # a crash mid-write leaves no record that looks complete


async def saved_imitation(key: dict[str, Any], source: Path, backend: Any) -> Imitation | None:
    """Load the model `save_imitation` left in a run's `out` folder `source` into `backend` and
    return its measurements, when it was saved under the same `key` (`imitation_key`); None
    (and why, printed) otherwise."""
    from agentrl.backends.local.backend import SAMPLER_DIR, STATE_DIR

    path = imitation_dir(source) / IMITATION_RECORD
    if not path.exists():
        print(f"imitation: no saved model in {path.parent}, imitating", flush=True)
        return None
    record = json.loads(path.read_text())
    # a field the saved key lacks was added to `ScratchSetup` since: its default (which keeps
    # the earlier behaviour) is what that model was imitated with
    defaults = _setup_json(ScratchSetup())
    saved = {**{k: defaults[k] for k in key if k in defaults}, **record["key"]}
    differ = sorted(k for k in key.keys() | saved.keys() if saved.get(k) != key.get(k))
    if differ:
        print(
            f"imitation: the model in {path.parent} was imitated with other "
            f"{', '.join(differ)}; imitating again",
            flush=True,
        )
        return None
    saved_dir = path.parent
    print(f"imitation: reusing the model saved in {saved_dir}", flush=True)
    await backend.load(
        CheckpointRef(IMITATION, str(saved_dir / STATE_DIR), str(saved_dir / SAMPLER_DIR))
    )
    return Imitation(
        explorer_train=Score(**record["explorer_train"]),
        explorer_eval=Score(**record["explorer_eval"]),
        demos=record["demos"],
        demo_tokens=record["demo_tokens"],
        sft_tokens=record["sft_tokens"],
        sft_loss=record["sft_loss"],
        reused=True,
    )


PLANNER = "planner"
"""The planner's evaluation label."""


def scratch_eval_files(out: Path, setup: ScratchSetup) -> tuple[Path, Path, Path]:
    """Where `run_scratch` writes its evaluations on the valid_unseen games (replacing an
    earlier run's): `out/eval/planner.jsonl`, `imitation.jsonl` (before RL) and
    `update-NNNN.jsonl` (after `setup.updates` updates, as the Trainer names its checkpoints)."""
    folder = out / "eval"
    after = f"update-{setup.updates:04d}"
    return folder / f"{PLANNER}.jsonl", folder / f"{IMITATION}.jsonl", folder / f"{after}.jsonl"


async def _record(groups: list[TrajectoryGroup], path: Path, label: str) -> None:
    """The played `groups` written as an evaluation file (`agentrl.evaluation.evaluate_tasks`:
    every episode, then summaries per split), for the plots and the viewer."""
    from agentrl.evaluation import evaluate_tasks

    played = {group.task.task_id: group for group in groups}

    async def replay(task: TaskInfo) -> TrajectoryGroup:
        return played[task.task_id]

    samples = max((len(g.trajectories) for g in groups), default=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tasks = [group.task for group in groups]
    await evaluate_tasks(
        tasks, replay, path, label=label, samples_per_game=samples, overwrite=True, progress=False
    )


async def _curve_point(
    run: _Run, backend: Any, tokenizer: Any, held_out: list[TaskInfo], update: int
) -> CurvePoint:
    """Held-out success after `update` RL updates (`ScratchSetup.eval_every`)."""
    _, score = await run.evaluate(backend, tokenizer, held_out)
    print(f"update {update}: valid_unseen success {score.success:.3f}", flush=True)
    return CurvePoint(update, score)


def _fresh(path: Path) -> Path:
    """`path`, an earlier run's file there first renamed aside (`NAME.K.jsonl`), kept."""
    if path.exists():
        number = 1
        while (aside := path.with_suffix(f".{number}{path.suffix}")).exists():
            number += 1
        path.rename(aside)
        print(f"{path} holds an earlier run's records: kept as {aside}", flush=True)
    return path


def imitation_batches(setup: ScratchSetup, demos: list[list[Datum]]) -> Iterator[list[Datum]]:
    """The datums of each of the `sft_steps` imitation steps: `sft_batch` demonstrations
    (`demonstration_datums`: each episode's segments), or with `sft_segments` `sft_batch`
    segments drawn from all of them, without replacement within a step; the draws are keyed by
    `setup.seed` alone."""
    rng = random.Random(setup.seed)
    units = [[datum] for episode in demos for datum in episode] if setup.sft_segments else demos
    for _ in range(setup.sft_steps):
        drawn = rng.sample(units, min(setup.sft_batch, len(units)))
        yield [datum for unit in drawn for datum in unit]


async def _imitate(
    setup: ScratchSetup,
    run: _Run,
    tokenizer: Any,
    games: ScratchTasks,
    copies: list[TaskInfo],
    backend: Any,
    lap: Callable[[str], None],
) -> Imitation:
    """The explorer's demonstrations (train games and copies, with the setup's mistakes) and
    its valid_unseen score, then `sft_steps` cross-entropy steps of `backend` on them."""
    noise = demo_noise(setup)
    groups, explorer_train = await run.explore(tokenizer, games.train + copies, noise=noise)
    demos = demonstration_datums(groups, tokenizer, noise, setup.sft_context_weight)
    _, explorer_eval = await run.explore(tokenizer, games.held_out, windowed=False)
    lap("demonstrations")
    print(f"explorer: train {explorer_train}, valid_unseen {explorer_eval}", flush=True)
    sft_loss, sft_tokens = [], 0
    for step, batch in enumerate(imitation_batches(setup, demos), start=1):
        fb = await backend.forward_backward(
            batch, LossName.CROSS_ENTROPY, imitation_loss(setup, batch)
        )
        await backend.optim_step(AdamParams(learning_rate=imitation_learning_rate(setup, step)))
        sft_loss.append(round(fb.loss, 4))
        sft_tokens += sum(len(d.target_tokens) for d in batch)
        if step % 50 == 0:
            print(f"imitation step {step}: loss {fb.loss:.4f}", flush=True)
    lap("imitation")
    return Imitation(
        explorer_train=explorer_train,
        explorer_eval=explorer_eval,
        demos=len(demos),
        demo_tokens=sum(len(d.target_tokens) + 1 for episode in demos for d in episode),
        sft_tokens=sft_tokens,
        sft_loss=sft_loss,
    )


async def run_scratch(
    setup: ScratchSetup,
    out: Path,
    data_root: Path | None = None,
    imitated: Path | None = None,
) -> ScratchResult:
    """Games, demonstrations, tokenizer, imitation, eval, RL, eval (see the module docstring).

    The imitated model is saved in `imitation_dir(out)`. With `imitated` (the `out` of an
    earlier run, or `out` itself), the model that run saved is loaded instead of imitating
    again when it was saved under this run's `imitation_key` (a sweep of RL settings
    from one imitated model; a rerun after a crash in RL); the demonstrations are then not
    played either, and the result's measurements of both phases are the saved run's."""
    clock = started = time.perf_counter()
    cpu_started = time.process_time()
    seconds: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = round(now - clock, 2)
        clock = now
        print(f"[{now - started:7.1f}s] {name} done", flush=True)

    if setup.torch_threads:
        import torch

        torch.set_num_threads(setup.torch_threads)
    games = scratch_tasks(setup, out, data_root)
    train, held_out = games.train, games.held_out
    lap("games")
    run = _Run(setup)
    copies = relabeled_tasks(train, setup.relabeled_copies)
    try:
        corpus_games = train[: setup.corpus_games] + copies[: setup.corpus_games]
        tokenizer = await _project_tokenizer(run, corpus_games)
        lap("tokenizer")
        backend = _backend(setup, tokenizer, out / "run")
        key = imitation_key(setup, games)
        imitation = await saved_imitation(key, imitated, backend) if imitated else None
        if imitation is None:
            imitation = await _imitate(setup, run, tokenizer, games, copies, backend, lap)
            await save_imitation(key, backend, imitation)
        else:
            lap("imitation")
        planned, planner = await run.plan(tokenizer, held_out)
        files = scratch_eval_files(out, setup)
        await _record(planned, files[0], PLANNER)
        played, before = await run.evaluate(backend, tokenizer, held_out)
        await _record(played, files[1], IMITATION)
        lap("eval_before_rl")
        print(f"planner (valid_unseen): {planner}\nbefore RL (valid_unseen): {before}", flush=True)
        curve = [CurvePoint(0, before)]
        train_success = []
        if setup.updates:
            # the Trainer's `run` would log each update; this loop drives `update` itself
            sink = JsonlSink(_fresh(out / "run" / "metrics.jsonl"))
            rl_tasks = games.rl or train
            if setup.kl_coef > 0:
                backend.freeze_reference()  # the KL penalty's reference: the imitated model
            trainer = _trainer(setup, run, backend, tokenizer, rl_tasks, out / "run", sink)
            try:
                for number in range(1, setup.updates + 1):
                    metrics = await trainer.update(number)
                    sink.log("train", number, metrics)
                    train_success.append(round(metrics.stats.success_rate, 4))
                    rate = metrics.stats.success_rate
                    print(f"update {number}: train success {rate:.3f}", flush=True)
                    due = setup.eval_every > 0 and number % setup.eval_every == 0
                    if due and number < setup.updates:  # the last one: the evaluation after RL
                        point = await _curve_point(run, backend, tokenizer, held_out, number)
                        curve.append(point)
                await trainer.save(setup.updates)  # the trained model, as the Trainer names it
            finally:
                await trainer.close()
                sink.close()
        lap("rl")
        played, after = await run.evaluate(backend, tokenizer, held_out)
        await _record(played, files[2], files[2].stem)
        curve.append(CurvePoint(setup.updates, after))
        lap("eval_after_rl")
        print(f"after RL (valid_unseen): {after}", flush=True)
    finally:
        await run.factory.close()
    seconds["total"] = round(time.perf_counter() - started, 2)
    cpu_seconds = round(time.process_time() - cpu_started, 2)
    return ScratchResult(
        setup=setup,
        device=str(backend.device),
        explorer_train=imitation.explorer_train,
        explorer_eval=imitation.explorer_eval,
        before_rl=before,
        after_rl=after,
        train_success=train_success,
        demos=imitation.demos,
        demo_tokens=imitation.demo_tokens,
        sft_tokens=imitation.sft_tokens,
        sft_loss=imitation.sft_loss,
        imitation_reused=imitation.reused,
        parameters=sum(p.numel() for p in backend.trainable_parameters()),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        planner_eval=planner,
        curve=curve,
        eval_files=[str(path) for path in files],
    )
