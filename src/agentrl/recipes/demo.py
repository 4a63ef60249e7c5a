"""`agentrl demo` (`make demo`): the whole recipe, small, on a CPU, with no account.

0. the learning benchmark at a small size (`agentrl.recipes.learning`): a small model trained from
   scratch on the fetch task by RL through the Trainer, in a process of its own beside phases
   1-5 (`agentrl.recipes.background`; about 4-5 minutes on one core); its held-out success
   curve (`<out>/plots/learning.png`, `<out>/learning.log`) and before/after are printed when
   it is done;
1. generate a small verified ALFWorld game set (`<out>/games`, reused when it exists);
2. build the `tiny` model (random-initialised Qwen3 architecture, real Qwen tokenizer) on the
   local backend and warm-start its LoRA with a few supervised steps on planner
   demonstrations of the training games (a random model never emits a tool call, so every
   group would be degenerate and nothing would be trained);
3. train a few GRPO/PPO updates (`<out>/run`: checkpoints, metrics, rollouts);
4. evaluate the base model and the last checkpoint on the generated validation games
   (`<out>/eval/*.jsonl`);
5. write the comparison plots (`<out>/plots`) and the HTML viewer of the last evaluation.

Phase 0 shows learning; phases 1-5 show the ALFWorld pipeline. The tiny model is far too
small to play ALFWorld: expect 0% success next to the planner's ceiling (evaluated on the
same games). Those phases show that every piece runs end to end and what the outputs look
like; learning ALFWorld needs a real model (`--backend local --base-model PATH` on a GPU, or
PyTRIO).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agentrl.algo.datums import Datum, trajectory_to_datum
from agentrl.backends.base import AdamParams, LossConfig, LossName, TrainingBackend
from agentrl.core.env import close_env_factory
from agentrl.core.types import TrajectoryGroup
from agentrl.envs.alfworld.baseline import planner_player
from agentrl.evaluation import EvalOutcome, evaluate
from agentrl.recipes.background import BackgroundJob
from agentrl.recipes.learning import DEMO as DEMO_LEARNING
from agentrl.recipes.learning import LearningResult, LearningSetup
from agentrl.tools import CommandTool

__all__ = ["DEMO_SIZES", "DemoReport", "DemoSize", "run_demo", "warm_start"]


@dataclass(frozen=True)
class DemoSize:
    """How much the demo runs."""

    train_games: int
    valid_seen: int
    valid_unseen: int
    updates: int
    games_per_batch: int
    group_size: int
    max_episode_steps: int
    max_assistant_tokens: int
    max_trajectory_tokens: int
    warm_start_steps: int
    warm_start_turns: int = 2
    """Supervised examples per demonstration: its first 1..N turns."""
    lora_rank: int = 16
    warm_start_lr: float = 1e-2
    learning_rate: float = 1e-4
    learning: LearningSetup | None = None
    """The learning phase (None: skip it)."""


DEMO_SIZES: dict[str, DemoSize] = {
    "default": DemoSize(
        train_games=6,
        valid_seen=2,
        valid_unseen=2,
        updates=3,
        games_per_batch=2,
        group_size=4,
        max_episode_steps=10,
        max_assistant_tokens=48,
        max_trajectory_tokens=3_000,
        warm_start_steps=10,
        learning=DEMO_LEARNING,
    ),
    "quick": DemoSize(
        train_games=1,
        valid_seen=1,
        valid_unseen=1,
        updates=2,
        games_per_batch=1,
        group_size=2,
        max_episode_steps=4,
        max_assistant_tokens=24,
        max_trajectory_tokens=1_500,
        warm_start_steps=2,
        warm_start_turns=1,
    ),
}
"""`default` (`make demo`: the learning phase, then the ALFWorld pipeline) and `quick` (the
smoke test: the ALFWorld pipeline only, at the smallest size)."""


@dataclass(frozen=True)
class DemoReport:
    """Where the demo wrote its outputs."""

    out: Path
    games: Path
    run_dir: Path
    evals: tuple[EvalOutcome, ...]
    plots: tuple[Path, ...]
    viewer: Path
    seconds: float
    phases: dict[str, float]
    """Seconds per phase (learning, games, warm start, training, evaluation)."""
    learning: LearningResult | None = None
    learning_plot: Path | None = None

    def describe(self) -> str:
        """A short human-readable summary."""
        from agentrl.reporting.sinks import format_table

        spent = ", ".join(f"{name} {sec:.0f}s" for name, sec in self.phases.items())
        lines = [f"\ndemo finished in {self.seconds:.0f}s ({spent}); outputs under {self.out}:"]
        if self.learning is not None:
            lines.append(f"  learning     {self.learning_plot}")
        lines.append(f"  games        {self.games}")
        lines.append(f"  training     {self.run_dir} (metrics.jsonl, rollouts.jsonl, checkpoints/)")
        for outcome in self.evals:
            lines.append(f"  eval {outcome.label:<8} {outcome.path}")
        lines.append(f"  plots        {self.plots[0].parent}")
        lines.append(f"  viewer       {self.viewer}")
        for outcome in self.evals:
            lines.append(f"\n{outcome.label}:")
            lines.append(format_table(outcome.summaries))
        lines.append(
            "\nALFWorld: the tiny random-initialised model cannot play it (0% next to the "
            "planner's ceiling is expected; its replies are not yet valid tool calls, so its "
            "reward stays near -0.1 x the step cap): this phase checks the pipeline. Train a "
            "real model with `agentrl train` (docs/recipe.md)."
        )
        if self.learning is not None:
            lines.append(learning_line(self.learning))
        return "\n".join(lines)


def learning_line(result: LearningResult) -> str:
    """The before/after line of the learning phase."""
    r = result
    curve = " -> ".join(f"{p.success:.0%}" for p in r.curve)
    return (
        f"\nLearning (fetch task, held-out games): random policy {r.random_success:.0%}, "
        f"before RL {r.before:.0%}, after {len(r.train_success)} updates {r.after:.0%} "
        f"({(r.after - r.before) * 100:+.0f} points; curve {curve})"
    )


def demonstration_datums(groups: Sequence[TrajectoryGroup], turns: int) -> list[Datum]:
    """Supervised datums from demonstrations: each one's first 1..`turns` turns, weight 1."""
    datums: list[Datum] = []
    for group in groups:
        for trajectory in group.trajectories:
            for k in range(1, min(turns, len(trajectory.turns)) + 1):
                prefix = replace(trajectory, turns=trajectory.turns[:k])
                datums.append(trajectory_to_datum(prefix, [1.0] * k))
    return datums


async def warm_start(
    backend: TrainingBackend, datums: Sequence[Datum], steps: int, learning_rate: float
) -> list[float]:
    """`steps` supervised (cross-entropy) steps on `datums`; returns the loss of each step."""
    losses = []
    for _ in range(steps):
        result = await backend.forward_backward(datums, LossName.CROSS_ENTROPY, LossConfig())
        await backend.optim_step(AdamParams(learning_rate=learning_rate))
        losses.append(result.loss)
    return losses


def _engine() -> str:
    from agentrl.envs.alfworld.engine import ENGINES

    return "fast" if "fast" in ENGINES else "textworld"


async def _demo(out: Path, games: Path, size: DemoSize, progress: bool) -> DemoReport:
    from agentrl.config import EvalConfig, TrainConfig
    from agentrl.reporting.plots import plot_eval_files
    from agentrl.reporting.viewer import write_viewer
    from agentrl.training import recipe
    from agentrl.training.trainer import Trainer

    phases: dict[str, float] = {}
    clock = time.perf_counter()
    common = dict(
        base_model=recipe.TINY_MODEL,
        backend="local",
        device="cpu",
        data_root=games,
        env_engine=_engine(),
        max_episode_steps=size.max_episode_steps,
        max_assistant_tokens=size.max_assistant_tokens,
        max_trajectory_tokens=size.max_trajectory_tokens,
        show_admissible=False,  # shorter prompts for a CPU
    )
    config = TrainConfig.model_validate(
        dict(
            common,
            max_steps=size.updates,
            games_per_batch=size.games_per_batch,
            group_size=size.group_size,
            lora_rank=size.lora_rank,
            learning_rate=size.learning_rate,
            save_every=size.updates,
            run_dir=out / "run",
        )
    )
    tokenizer = recipe.tokenizer_for(config)
    protocol = recipe.tool_protocol_for(config)
    if not isinstance(protocol, CommandTool):
        raise ValueError("the demo plays ALFWorld; use --env alfworld")
    renderer = recipe.renderer_for(tokenizer, protocol)
    env_factory = recipe.env_factory_for(config)
    tasks = recipe.tasks_for(config, ["train"], size.train_games)
    backend = await recipe.training_backend_for(config, tokenizer)
    if size.warm_start_steps:
        play = planner_player(
            env_factory=env_factory,
            renderer=renderer,
            protocol=protocol,
            rollout=recipe.rollout_config_for(config, 1, config.sampling_params()),
            reward_fn=config.reward_fn(),
        )
        print(f"warm start: planner demonstrations of {len(tasks)} games, ", end="", flush=True)
        demos = await asyncio.gather(*(play(task) for task in tasks))
        datums = demonstration_datums(demos, size.warm_start_turns)
        losses = await warm_start(backend, datums, size.warm_start_steps, size.warm_start_lr)
        print(f"{len(losses)} supervised steps, loss {losses[0]:.2f} -> {losses[-1]:.2f}")
        phases["warm start"] = time.perf_counter() - clock
        clock = time.perf_counter()
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=env_factory,
        tasks=tasks,
        renderer=renderer,
        protocol=protocol,
        progress=progress,
    )
    try:
        result = await trainer.run()
    finally:
        await trainer.close()
        await close_env_factory(env_factory)  # built here, so closed here
    phases["training"] = time.perf_counter() - clock
    clock = time.perf_counter()
    last = result.checkpoints[-1]
    evals = []
    runs: tuple[tuple[str, Path | None, str], ...] = (
        ("planner", None, "planner"),
        ("base", None, "model"),
        (last.name, out / "run/checkpoints" / last.name, "model"),
    )
    for label, model_path, policy in runs:
        eval_config = EvalConfig.model_validate(
            dict(
                common,
                output=out / "eval" / f"{label}.jsonl",
                model_path=None if model_path is None else f"{model_path}.json",
                experiment_name=label,
                limit_per_split=max(size.valid_seen, size.valid_unseen),
                policy=policy,
            )
        )
        evals.append(await evaluate(eval_config, progress=progress))
    plots = plot_eval_files([e.path for e in evals], out / "plots")
    viewer = write_viewer(evals[-1].path)
    phases["evaluation"] = time.perf_counter() - clock
    return DemoReport(out, games, out / "run", tuple(evals), plots, viewer, 0.0, phases)


def run_demo(
    out: Path,
    size: DemoSize | None = None,
    *,
    games: Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> DemoReport:
    """Run the demo into `out`; games are generated into `<out>/games` (kept and reused
    between runs) unless `games` names an existing data root."""
    from agentrl.envs.alfworld.generate import generate_games

    size = size or DEMO_SIZES["default"]
    out = Path(out)
    results = [out / name for name in ("run", "eval", "plots", "learning", "learning.log")]
    if any(p.exists() for p in results):
        if not overwrite:
            raise FileExistsError(
                f"{out} holds an earlier demo; pass --overwrite to replace it, or another --out"
            )
        for path in results:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    started = time.perf_counter()
    learning = None
    if size.learning is not None:
        learning = _start_learning_phase(out, size.learning)
    try:
        if games is None:
            games = out / "games"
            report = generate_games(
                games,
                train=size.train_games,
                valid_seen=size.valid_seen,
                valid_unseen=size.valid_unseen,
                seed=0,
                progress=progress,
            )
            wanted = size.train_games + size.valid_seen + size.valid_unseen
            if len(report.games) < wanted:
                raise RuntimeError(
                    f"only {len(report.games)} of {wanted} demo games verified: "
                    f"{report.failures[-3:]}"
                )
        generated = time.perf_counter() - started
        result = asyncio.run(_demo(out, games, size, progress))
        phases = {"games": generated, **result.phases}
        learned, learning_plot = None, None
        if learning is not None:
            learned, learning_plot, learning_seconds = _finish_learning_phase(learning)
            phases = {"learning (beside the rest)": learning_seconds, **phases}
    finally:
        if learning is not None:
            learning.close()
    seconds = time.perf_counter() - started
    return replace(
        result, seconds=seconds, phases=phases, learning=learned, learning_plot=learning_plot
    )


def _start_learning_phase(
    out: Path, setup: LearningSetup
) -> BackgroundJob[tuple[LearningResult, Path]]:
    """Phase 0 in a process of its own, beside the ALFWorld phases (it trains on one torch
    thread; its curve goes to `<out>/learning.log` and is printed when it is done)."""
    log = out / "learning.log"
    print(
        "learning phase: a tiny model learns the fetch task by RL, in the background beside the "
        f"ALFWorld phases (progress: {log})",
        flush=True,
    )
    return BackgroundJob.start(_learning_phase, (out, setup), log=log)


def _finish_learning_phase(
    job: BackgroundJob[tuple[LearningResult, Path]],
) -> tuple[LearningResult, Path, float]:
    """Wait for phase 0; print its curve (the log's lines); its result, plot and seconds."""
    if job.process.is_alive():
        print("waiting for the learning phase to finish ...", flush=True)
    learned, plot = job.result()
    seconds = time.perf_counter() - job.started
    print(job.log.read_text(encoding="utf-8").rstrip(), flush=True)
    return learned, plot, seconds


def _learning_phase(out: Path, setup: LearningSetup) -> tuple[LearningResult, Path]:
    """Phase 0: the learning benchmark at a small size; prints its curve as it goes."""
    import torch

    from agentrl.recipes.learning import fetch_tokenizer, plot_learning, run_learning

    print("learning phase: a tiny model learns the fetch task by RL (held-out success):")

    def point(p: object) -> None:
        from agentrl.recipes.learning import EvalPoint

        assert isinstance(p, EvalPoint)
        print(f"  update {p.update:3d}: {p.success:.0%} ({p.seconds:.0f}s)", flush=True)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model is faster on one thread; the games run beside it
    try:
        result = asyncio.run(
            run_learning(setup, fetch_tokenizer(setup), out / "learning", on_point=point)
        )
    finally:
        torch.set_num_threads(threads)
    plot = plot_learning(result, out / "plots" / "learning.png")
    return result, plot  # the before/after line is the demo summary's (`DemoReport.describe`)
