"""Shared machinery of the learning benchmarks (`learning.py`: estimators, `losses.py`: losses).

A *variant* is a name and a change to `agentrl.recipes.learning.LearningSetup`; every (variant,
seed) runs `agentrl.recipes.learning.run_learning` in its own process with `--threads` torch
threads (default 1; `--jobs` at a time), writing `runs/<variant>-seed<k>.json`. The parent then
writes the curves (PNG: held-out success per update, mean over seeds with a min-max band, the
random policy dashed), a markdown table, which pairwise differences exceed seed noise, and the
one-line summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agentrl.algo.schedule import LRSchedule
from agentrl.recipes import learning
from agentrl.recipes.fetch import FETCH_TASKS
from agentrl.recipes.learning import LearningSetup

Run = dict[str, Any]
"""One run's JSON result (an `agentrl.recipes.learning.LearningResult` as written by the worker)."""
Variant = Callable[[LearningSetup], LearningSetup]
"""A change to the setup (e.g. another estimator or loss)."""

SIZES = ("robust", "benchmark", "test", "demo", "smoke")
TASKS: dict[str, Variant] = FETCH_TASKS
"""`--task`: `agentrl.recipes.fetch.FETCH_TASKS`."""
OK_AT = {"fetch": 0.9, "fetch2": 0.8}
"""The held-out success a seed must reach to count in `seeds_ok` of the summary line."""


def base_setup(size: str, seed: int, updates: int | None, task: str = "fetch") -> LearningSetup:
    """The preset `size` of `task` with `seed` (and `updates`, when given)."""
    presets = {
        "robust": learning.ROBUST,
        "benchmark": learning.BENCHMARK,
        "test": learning.TEST,
        "demo": learning.DEMO,
    }
    chosen = TASKS[task](replace(presets.get(size, learning.SMOKE), seed=seed))
    return replace(chosen, updates=updates) if updates else chosen


def setup_of(args: argparse.Namespace, variant: Variant, seed: int) -> LearningSetup:
    """The setup of one run: the preset, then the variant's change, then `--learning-rate`,
    `--kl-coef` and `--lr-schedule` / `--final-learning-rate`."""
    setup = variant(base_setup(args.size, seed, args.updates, args.task))
    if args.learning_rate:
        setup = replace(setup, learning_rate=args.learning_rate)
    if args.kl_coef is not None:
        setup = replace(setup, kl_coef=args.kl_coef)
    if args.warmup_updates is not None:
        setup = replace(setup, warmup_updates=args.warmup_updates)
    if args.lr_schedule is not None:
        final = args.final_learning_rate
        setup = replace(setup, lr_schedule=LRSchedule(args.lr_schedule), final_learning_rate=final)
    return setup


def check_overrides(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any run starts, the overrides the workers' TrainConfig would refuse
    after their warm starts: a negative `--kl-coef` or `--warmup-updates`,
    `--final-learning-rate` alone."""
    if args.kl_coef is not None and args.kl_coef < 0:
        parser.error(f"--kl-coef must be >= 0, got {args.kl_coef}")
    if args.warmup_updates is not None and args.warmup_updates < 0:
        parser.error(f"--warmup-updates must be >= 0, got {args.warmup_updates}")
    if args.final_learning_rate is not None and args.lr_schedule in (None, "constant"):
        parser.error(
            "--final-learning-rate is the end of a schedule: add --lr-schedule linear or "
            "--lr-schedule cosine, or drop it"
        )


def add_arguments(
    parser: argparse.ArgumentParser,
    variants: Sequence[str],
    out: str,
    default_size: str = "benchmark",
) -> None:
    """The options both benchmarks share (and the hidden worker options); `--size` defaults
    to `default_size`."""
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--seeds", type=int, default=3, help="seeds F..F+N-1 (F: --first-seed)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed F")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument(
        "--size",
        choices=SIZES,
        default=default_size,
        help="the preset (robust: the benchmark's plus a KL penalty and 350 updates; "
        f"default: {default_size})",
    )
    parser.add_argument("--task", choices=list(TASKS), default="fetch", help="fetch | fetch2")
    parser.add_argument("--updates", type=int, default=None, help="override the update count")
    parser.add_argument("--learning-rate", type=float, default=None, help="override the RL lr")
    parser.add_argument(
        "--kl-coef",
        type=float,
        default=None,
        help="override the KL penalty to the warm-started policy (LearningSetup.kl_coef)",
    )
    parser.add_argument(
        "--lr-schedule",
        choices=[s.value for s in LRSchedule],
        default=None,
        help="override the RL learning rate's schedule (LearningSetup.lr_schedule)",
    )
    parser.add_argument(
        "--warmup-updates",
        type=int,
        default=None,
        help="override the RL learning rate's linear warmup (LearningSetup.warmup_updates)",
    )
    parser.add_argument(
        "--final-learning-rate",
        type=float,
        default=None,
        help="where a linear or cosine --lr-schedule ends (default: a tenth of the RL lr)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=variants, default=variants[0], help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)


def worker(args: argparse.Namespace, variants: Mapping[str, Variant]) -> None:
    """One (variant, seed) run in this process; writes its JSON result."""
    import torch

    from agentrl.recipes.learning import fetch_tokenizer, run_learning

    torch.set_num_threads(args.threads)
    setup = setup_of(args, variants[args.variant], args.seed)
    name = f"{args.variant}-seed{args.seed}"

    def point(p: object) -> None:
        print(f"{name} {p}", flush=True)

    result = asyncio.run(
        run_learning(setup, fetch_tokenizer(setup), args.out / "work" / name, on_point=point)
    )
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    (args.out / "runs" / f"{name}.json").write_text(json.dumps(asdict(result), indent=2))


def run_all(
    script: Path, args: argparse.Namespace, names: Sequence[str]
) -> tuple[dict[str, list[Run]], float]:
    """Every (variant, seed) of `names`, `args.jobs` at a time (`args.threads` torch threads
    each); results and wall minutes."""
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    first = getattr(args, "first_seed", 0)
    seeds = range(first, first + args.seeds)
    jobs = [(name, seed) for name in names for seed in seeds]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(lambda job: _launch(script, args, *job), jobs))
    results: dict[str, list[Run]] = {}
    for (name, _), run in zip(jobs, done, strict=True):
        results.setdefault(name, []).append(run)
    return results, (time.perf_counter() - started) / 60


def _launch(script: Path, args: argparse.Namespace, variant: str, seed: int) -> Run:
    command = [sys.executable, str(script), "--worker", "--out", str(args.out)]
    command += ["--size", args.size, "--variant", variant, "--seed", str(seed)]
    # the options only learning.py / losses.py declare (learning_vault.py shares run_all)
    if getattr(args, "task", "fetch") != "fetch":
        command += ["--task", args.task]
    command += ["--threads", str(args.threads)]
    if args.updates:
        command += ["--updates", str(args.updates)]
    if getattr(args, "learning_rate", None):
        command += ["--learning-rate", str(args.learning_rate)]
    if getattr(args, "kl_coef", None) is not None:
        command += ["--kl-coef", str(args.kl_coef)]
    if getattr(args, "lr_schedule", None) is not None:
        command += ["--lr-schedule", args.lr_schedule]
    if getattr(args, "warmup_updates", None) is not None:
        command += ["--warmup-updates", str(args.warmup_updates)]
    if getattr(args, "final_learning_rate", None) is not None:
        command += ["--final-learning-rate", str(args.final_learning_rate)]
    log = args.out / "logs" / f"{variant}-seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    if code != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {code}); see {log}")
    data: Run = json.loads((args.out / "runs" / f"{variant}-seed{seed}.json").read_text())
    print(f"done {variant} seed {seed}: {_brief(data)}", flush=True)
    return data


def _curve(run: Run) -> list[dict[str, float]]:
    curve = run["curve"]
    assert isinstance(curve, list)
    return curve


def _brief(run: Run) -> str:
    curve = _curve(run)
    return f"success {curve[0]['success']:.2f} -> {curve[-1]['success']:.2f}"


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
    return mean, math.sqrt(var)


def success(run: Run, index: int) -> float:
    """Held-out success at curve point `index` (0: before RL, -1: after)."""
    return float(_curve(run)[index]["success"])


def first_at(run: Run, level: float) -> int | None:
    """The first update whose held-out success reaches `level` (None: never)."""
    return next((int(p["update"]) for p in _curve(run) if p["success"] >= level), None)


def table(results: Mapping[str, list[Run]], label: str, ok_at: float = 0.9) -> str:
    """Markdown: per variant, held-out success (mean ± std over seeds), the spread and how many
    seeds end at or above `ok_at`."""
    lines = [
        f"| {label} | seeds | random policy | before RL | after RL (mean ± std) | min / max "
        f"after | seeds >= {ok_at:.0%} after | curve mean | first update >= 90% (per seed) | "
        "minutes per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        rand = mean_std([float(r["random_success"]) for r in runs])[0]
        before = mean_std([success(r, 0) for r in runs])[0]
        after = [success(r, -1) for r in runs]
        mean, std = mean_std(after)
        area = mean_std([_area(r) for r in runs])[0]
        firsts = ", ".join(or_dash(first_at(r, 0.9)) for r in runs)
        minutes = mean_std([float(r["seconds"]) / 60 for r in runs])[0]
        lines.append(
            f"| {name} | {len(runs)} | {rand:.1%} | {before:.1%} | {mean:.1%} ± {std:.1%} | "
            f"{min(after):.1%} / {max(after):.1%} | {seeds_ok(runs, ok_at)} | {area:.1%} | "
            f"{firsts} | {minutes:.1f} |"
        )
    return "\n".join(lines)


def or_dash(update: int | None) -> str:
    """An update number for a table; `-` for none."""
    return "-" if update is None else str(update)


def seeds_ok(runs: Sequence[Run], level: float) -> int:
    """How many runs end with held-out success >= `level`."""
    return sum(success(r, -1) >= level for r in runs)


def _area(run: Run) -> float:
    """The curve's mean held-out success (how early it learns, not only where it ends)."""
    curve = _curve(run)
    return sum(float(p["success"]) for p in curve) / len(curve)


def noise_report(results: Mapping[str, list[Run]]) -> list[str]:
    """Pairs whose difference (final success, and the curve's mean) exceeds seed noise:
    |mean_a - mean_b| > 2 * sqrt(std_a^2 / n_a + std_b^2 / n_b)."""
    out = []
    names = list(results)
    metrics: tuple[tuple[str, Callable[[Run], float]], ...] = (
        ("final success", lambda r: success(r, -1)),
        ("curve mean", _area),
    )
    for metric, value in metrics:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ma, sa = mean_std([value(r) for r in results[a]])
                mb, sb = mean_std([value(r) for r in results[b]])
                noise = 2 * math.sqrt(sa**2 / len(results[a]) + sb**2 / len(results[b]))
                verdict = "EXCEEDS seed noise" if abs(ma - mb) > noise else "within seed noise"
                out.append(
                    f"{metric}: {a} {ma:.3f} vs {b} {mb:.3f} (2-sigma {noise:.3f}): {verdict}"
                )
    return out


def plot(results: Mapping[str, list[Run]], path: Path, title: str) -> None:
    """Held-out success per update: mean over seeds, min-max band; the random policy dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for name, runs in results.items():
        curves = [_curve(r) for r in runs]
        updates = [int(p["update"]) for p in curves[0]]
        per = [[float(c[i]["success"]) for c in curves] for i in range(len(updates))]
        mean = [sum(v) / len(v) for v in per]
        line = axes.plot(updates, mean, marker="o", label=f"{name} ({len(runs)} seeds)")[0]
        axes.fill_between(
            updates, [min(v) for v in per], [max(v) for v in per], alpha=0.2, color=line.get_color()
        )
    first = next(iter(results.values()))
    rand = sum(float(r["random_success"]) for r in first) / len(first)
    axes.axhline(rand, linestyle="--", color="grey", label=f"random valid policy ({rand:.0%})")
    axes.set(title=title, xlabel="update", ylabel="held-out success", ylim=(0, 1.02))
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def report(
    results: Mapping[str, list[Run]],
    args: argparse.Namespace,
    minutes: float,
    *,
    stem: str,
    label: str,
    title: str,
) -> str:
    """Write `<stem>.png` and `<stem>.md`, print them; return the summary line of the first
    variant: `random_success=R success_before=B success_after=A seeds=N minutes=M seeds_ok=K`
    (K: seeds ending at or above the task's `OK_AT`)."""
    ok_at = OK_AT[args.task]
    plot(results, args.out / f"{stem}.png", f"{title} [{args.task}]")
    noise = noise_report(results) if len(results) > 1 else []
    load = os.getloadavg()
    text = [table(results, label, ok_at), "", *(f"- {line}" for line in noise)]
    text.append(f"\nwall time {minutes:.1f} min; load average at the end {load[0]:.2f}")
    (args.out / f"{stem}.md").write_text("\n".join(text) + "\n")
    print(f"setup: {base_setup(args.size, 0, args.updates, args.task)}")
    print("\n".join(text))
    print(f"wrote {args.out / f'{stem}.png'}, {stem}.md, runs/*.json")
    first = next(iter(results.values()))
    rand = sum(float(r["random_success"]) for r in first) / len(first)
    before = sum(success(r, 0) for r in first) / len(first)
    after = sum(success(r, -1) for r in first) / len(first)
    return (
        f"random_success={rand:.3f} success_before={before:.3f} success_after={after:.3f} "
        f"seeds={len(first)} minutes={minutes:.1f} seeds_ok={seeds_ok(first, ok_at)}"
    )


def main(
    script: Path,
    description: str,
    variants: Mapping[str, Variant],
    *,
    option: str,
    stem: str,
    label: str,
    title: str,
    default: Sequence[str] | None = None,
    default_size: str = "benchmark",
) -> None:
    """A benchmark's command line: `option` (e.g. `--estimators`) picks variants (`default`:
    all of them), `--size` the preset (`default_size`); with the hidden `--worker` flag, be
    one run; else run them all, report, print the summary line."""
    names = list(variants)
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser, names, f"runs/{stem}", default_size)
    chosen = list(default) if default is not None else names
    parser.add_argument(option, nargs="+", choices=names, default=chosen, dest="chosen")
    args = parser.parse_args()
    check_overrides(parser, args)
    if args.worker:
        worker(args, variants)
        return
    results, minutes = run_all(script, args, args.chosen)
    print(report(results, args, minutes, stem=stem, label=label, title=title))
