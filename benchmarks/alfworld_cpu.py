"""ALFWorld on 2 CPU cores, in miniature: imitation of the exploring expert, then RL, seeds.

The `cpu` preset of the from-scratch recipe (`agentrl.recipes.alfworld_scratch.CPU`): "put"
games (`pick_and_place_simple`) in the small rooms (at most 13 receptacles), generated once
into `--out/games` (train floor plans, and valid_unseen floor plans train never uses) and
shared by the seeds; per seed a project tokenizer, a 0.24M-parameter Qwen3-architecture model
from random weights, cross-entropy imitation of the explorer's demonstrations (the goal
restated and the commands that act where the agent stands listed in every tool message, the
`go to` lines left out; every prompt cut to its first observation and last 2 turns, plus a
slack of 2; 600 steps, the environment's text a second target at a tenth of the weight),
greedy success on valid_unseen, RL (16 updates) through the Trainer on train games kept out
of the demonstrations (GiGPO: the group-mean advantage plus a per-turn one among the group's
turns from the same game state; PPO, 4 optimizer steps an update at a rate falling from 3e-4
to 3e-5 on a cosine, a KL penalty of 0.2 to the imitated model; reward
`1[won] - 0.1 x invalid`), success on valid_unseen again. The seeds run side by side
(`--parallel`, default all of them up to 3), each in a process of its own with one torch
thread on 2 cores; a seed's numbers can differ from a run of it alone with 2 threads, which
sum floats in another order.
Each seed writes `--out/seed-K/result.{json,md}`, its evaluations (`eval/*.jsonl`: the planner,
the imitated model, after RL) and plots (`plots/alfworld.png`: held-out success per RL update,
with `--eval-every N` points during RL); the summary
(per seed and mean +- std: success, steps and invalid actions per episode, before and after
RL) goes to `--out/summary.md`, and the last line printed is

    imitation_success=I rl_success=A seeds=N improved_seeds=K minutes=M

(`improved_seeds`: seeds whose success after RL is above their success before it).

    python benchmarks/alfworld_cpu.py --out runs/alfworld-cpu             # 3 seeds
    python benchmarks/alfworld_cpu.py --out runs/alfworld-cpu --seeds 1   # one

`--data-root DIR` plays games already generated there; `--preset cpu-smoke` checks the
plumbing in seconds (the test's size); `--imitated DIR` (an earlier `--out`) reuses each
seed's imitated model saved there, so that RL settings can be swept at the cost of RL alone.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from agentrl.executors.child import die_with_parent
from agentrl.recipes.alfworld_scratch import (
    PRESETS,
    ScratchResult,
    ScratchSetup,
    add_format_arguments,
    format_overrides,
    generate_scratch_games,
    result_markdown,
    run_scratch,
    write_results,
)


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def summary_markdown(results: list[ScratchResult]) -> str:
    """Per seed and mean ± std over seeds, before and after RL (valid_unseen)."""
    lines = [
        "| seed | success before RL | after RL | steps / episode before | after "
        "| invalid / episode before | after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b, a = r.before_rl, r.after_rl
        lines.append(
            f"| {r.setup.seed} | {b.success:.3f} | {a.success:.3f} | {b.turns_per_episode:.1f} | "
            f"{a.turns_per_episode:.1f} | {b.invalid_per_episode:.2f} | "
            f"{a.invalid_per_episode:.2f} |"
        )
    columns = [
        [r.before_rl.success for r in results],
        [r.after_rl.success for r in results],
        [r.before_rl.turns_per_episode for r in results],
        [r.after_rl.turns_per_episode for r in results],
        [r.before_rl.invalid_per_episode for r in results],
        [r.after_rl.invalid_per_episode for r in results],
    ]
    lines.append("| mean | " + " | ".join(_spread(c) for c in columns) + " |")
    explorer = results[0].explorer_eval
    lines += [
        "",
        f"The exploring expert on the same valid_unseen games: {explorer.success:.3f} success, "
        f"{explorer.turns_per_episode:.1f} steps per episode.",
    ]
    return "\n".join(lines) + "\n"


def last_line(results: list[ScratchResult], minutes: float) -> str:
    """The script's headline: mean success before / after RL, seeds, seeds improved, time."""
    before = statistics.mean(r.before_rl.success for r in results)
    after = statistics.mean(r.after_rl.success for r in results)
    improved = sum(r.after_rl.success > r.before_rl.success for r in results)
    return (
        f"imitation_success={before:.3f} rl_success={after:.3f} seeds={len(results)} "
        f"improved_seeds={improved} minutes={minutes:.1f}"
    )


def run_seed(
    setup: ScratchSetup, run_dir: Path, games: Path, imitated: Path | None = None
) -> ScratchResult:
    """One seed of the benchmark, written to `run_dir` (`write_results`) as soon as it ends
    (`imitated`: an earlier run of the seed whose imitated model to reuse, `run_scratch`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run_scratch(setup, run_dir, games, imitated))
    write_results(result, run_dir)
    print(f"seed {setup.seed}:\n{result_markdown(result)}", flush=True)
    return result


def seed_threads(setup_threads: int, parallel: int, seeds: int, threads: int | None) -> int:
    """Torch threads of each seed: `threads` when given; else the setup's when the seeds run
    one at a time, and the machine's cores shared out among the seeds side by side."""
    if threads is not None:
        return threads
    if parallel <= 1:
        return setup_threads
    return max(1, (os.cpu_count() or 1) // min(parallel, seeds))


def seed_pool(parallel: int) -> ProcessPoolExecutor:
    """The processes the seeds run in side by side: spawned, and killed by Linux when this
    process ends (`die_with_parent`), so that a benchmark stopped with `kill` or `timeout` does
    not leave its seeds training on (their env workers die with them in turn)."""
    return ProcessPoolExecutor(
        parallel, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent
    )


def run_seeds(
    base: ScratchSetup,
    seeds: list[int],
    out: Path,
    games: Path,
    parallel: int,
    imitated: Path | None = None,
    threads: int | None = None,
) -> list[ScratchResult]:
    """Every seed, `parallel` at a time, each in a process of its own when side by side, with
    `seed_threads` torch threads. Measured on 2 cores (docs/alfworld.md): side by side saves
    time in RL's rollouts, whose env and Python waits overlap, and none in imitation.
    `imitated`: an earlier `--out` of this benchmark, whose seed K's imitated model seed K
    reuses when it was imitated with the same setup (same seeds, same `parallel`)."""

    def source(seed: int) -> Path | None:
        return imitated / f"seed-{seed}" if imitated else None

    each = replace(
        base, torch_threads=seed_threads(base.torch_threads, parallel, len(seeds), threads)
    )
    if parallel <= 1:
        return [run_seed(replace(each, seed=s), out / f"seed-{s}", games, source(s)) for s in seeds]
    with seed_pool(parallel) as pool:
        futures = [
            pool.submit(run_seed, replace(each, seed=s), out / f"seed-{s}", games, source(s))
            for s in seeds
        ]
        return [f.result() for f in futures]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--preset", choices=sorted(PRESETS), default="cpu", help="cpu-smoke: plumbing only"
    )
    parser.add_argument(
        "--data-root", type=Path, default=None, help="play games already generated here"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="seeds run at once, each in its own process (default: all of them, up to 3)",
    )
    parser.add_argument("--sft-steps", type=int, default=None, help="override the preset's")
    parser.add_argument("--updates", type=int, default=None, help="override the RL updates")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch's CPU threads per seed (default: the preset's for one seed at a time, the "
        "cores shared out among seeds side by side); 1 when another run shares the cores",
    )
    parser.add_argument(
        "--imitated",
        type=Path,
        default=None,
        help="an earlier --out of this benchmark: each seed reuses the imitated model saved "
        "there when it was imitated with the same setup (RL settings may differ), and skips "
        "its demonstrations and imitation (--out itself resumes after a crash in RL)",
    )
    add_format_arguments(parser)
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    parallel = min(args.seeds, 3) if args.parallel is None else args.parallel
    if parallel < 1:
        parser.error(f"--parallel must be >= 1, got {parallel}")
    if args.torch_threads is not None and args.torch_threads < 1:
        parser.error(f"--torch-threads must be >= 1, got {args.torch_threads}")
    overrides = {
        "sft_steps": args.sft_steps,
        "updates": args.updates,
    }
    chosen = PRESETS[args.preset]
    given = {k: v for k, v in overrides.items() if v is not None}
    base = format_overrides(replace(chosen, **given), args)
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    games = args.data_root or generate_scratch_games(base, args.out / "games")  # seed: preset's
    print(f"[{time.perf_counter() - started:7.1f}s] games ready in {games}", flush=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    results = run_seeds(base, seeds, args.out, games, parallel, args.imitated, args.torch_threads)
    summary = summary_markdown(results)
    (args.out / "summary.md").write_text(summary)
    print(summary)
    print(last_line(results, (time.perf_counter() - started) / 60))


if __name__ == "__main__":
    main()
