"""Learning that wins: held-out success of the fetch task from the random policy's level up.

Trains the tiny from-scratch model (project tokenizer, full fine-tuning, local backend) with the
library's Trainer, rollout engine, estimators and PPO loss (`agentrl.learning`), for every
estimator and seed, each run in its own process with one torch thread; then writes the curves
(`learning.png`: held-out success per update, mean over seeds with a min-max band), a markdown
table (`learning.md`), the raw results (`runs/*.json`) and which estimator differences exceed
seed noise. The last line printed is

    random_success=R success_before=B success_after=A seeds=N minutes=M

(held-out success rates, means over seeds, of the first estimator listed; minutes of wall time).

    python benchmarks/learning.py --out runs/learning                       # 4 estimators x 3 seeds
    python benchmarks/learning.py --out runs/one --estimators group_mean --seeds 1
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agentrl import learning
from agentrl.learning import LearningSetup

Run = dict[str, Any]
"""One run's JSON result (an `agentrl.learning.LearningResult`)."""

ESTIMATORS = ("group_mean", "group_normalized", "leave_one_out", "gigpo")
SIZES = ("benchmark", "test", "demo", "smoke")


def _setup(size: str, estimator: str, seed: int, updates: int | None) -> LearningSetup:

    presets = {"benchmark": learning.BENCHMARK, "test": learning.TEST, "demo": learning.DEMO}
    base = presets.get(size, learning.SMOKE)
    chosen = replace(base, estimator=estimator, seed=seed)
    return replace(chosen, updates=updates) if updates else chosen


def worker(args: argparse.Namespace) -> None:
    """One (estimator, seed) run in this process; writes its JSON result."""
    import torch

    from agentrl.learning import fetch_tokenizer, run_learning

    torch.set_num_threads(1)
    setup = _setup(args.size, args.estimator, args.seed, args.updates)
    name = f"{args.estimator}-seed{args.seed}"

    def point(p: object) -> None:
        print(f"{name} {p}", flush=True)

    result = asyncio.run(
        run_learning(setup, fetch_tokenizer(), args.out / "work" / name, on_point=point)
    )
    payload = asdict(result)
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    (args.out / "runs" / f"{name}.json").write_text(json.dumps(payload, indent=2))


def _launch(args: argparse.Namespace, estimator: str, seed: int) -> Run:
    command = [sys.executable, __file__, "--worker", "--out", str(args.out), "--size", args.size]
    command += ["--estimator", estimator, "--seed", str(seed)]
    if args.updates:
        command += ["--updates", str(args.updates)]
    log = args.out / "logs" / f"{estimator}-seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with log.open("w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    if code != 0:
        raise RuntimeError(f"{estimator} seed {seed} failed (exit {code}); see {log}")
    data: Run = json.loads((args.out / "runs" / f"{estimator}-seed{seed}.json").read_text())
    print(f"done {estimator} seed {seed}: {_brief(data)}", flush=True)
    return data


def _brief(run: Run) -> str:
    curve = run["curve"]
    assert isinstance(curve, list)
    return f"success {curve[0]['success']:.2f} -> {curve[-1]['success']:.2f}"


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
    return mean, math.sqrt(var)


def _success(run: Run, index: int) -> float:
    curve = run["curve"]
    assert isinstance(curve, list)
    return float(curve[index]["success"])


def _first_at(run: Run, level: float) -> int | None:
    curve = run["curve"]
    assert isinstance(curve, list)
    return next((int(p["update"]) for p in curve if p["success"] >= level), None)


def table(results: dict[str, list[Run]]) -> str:
    """Markdown: per estimator, held-out success (mean ± std over seeds) and the spread."""
    lines = [
        "| estimator | seeds | random policy | before RL | after RL (mean ± std) | min / max "
        "after | first update >= 90% (per seed) | minutes per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        rand = _mean_std([float(r["random_success"]) for r in runs])[0]
        before = _mean_std([_success(r, 0) for r in runs])[0]
        after = [_success(r, -1) for r in runs]
        mean, std = _mean_std(after)
        firsts = ", ".join(str(_first_at(r, 0.9) or "-") for r in runs)
        minutes = _mean_std([float(r["seconds"]) / 60 for r in runs])[0]
        lines.append(
            f"| {name} | {len(runs)} | {rand:.1%} | {before:.1%} | {mean:.1%} ± {std:.1%} | "
            f"{min(after):.1%} / {max(after):.1%} | {firsts} | {minutes:.1f} |"
        )
    return "\n".join(lines)


def _auc(run: Run) -> float:
    curve = run["curve"]
    assert isinstance(curve, list)
    return sum(float(p["success"]) for p in curve) / len(curve)


def noise_report(results: dict[str, list[Run]]) -> list[str]:
    """Pairs whose difference (final success, and the curve's mean) exceeds seed noise:
    |mean_a - mean_b| > 2 * sqrt(std_a^2 / n_a + std_b^2 / n_b)."""
    out = []
    names = list(results)
    for metric, value in (("final success", lambda r: _success(r, -1)), ("curve mean", _auc)):
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ma, sa = _mean_std([value(r) for r in results[a]])
                mb, sb = _mean_std([value(r) for r in results[b]])
                noise = 2 * math.sqrt(sa**2 / len(results[a]) + sb**2 / len(results[b]))
                verdict = "EXCEEDS seed noise" if abs(ma - mb) > noise else "within seed noise"
                out.append(
                    f"{metric}: {a} {ma:.3f} vs {b} {mb:.3f} (2-sigma {noise:.3f}): {verdict}"
                )
    return out


def plot(results: dict[str, list[Run]], path: Path) -> None:
    """Held-out success per update: mean over seeds, min-max band; the random policy dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for name, runs in results.items():
        curves = [r["curve"] for r in runs]
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
    axes.set(
        title="fetch task: held-out success (mean over seeds, min-max band)",
        xlabel="update",
        ylabel="success rate",
        ylim=(0, 1.02),
    )
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    """Run (or, with --worker, be one run of) the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/learning"))
    parser.add_argument("--estimators", nargs="+", choices=ESTIMATORS, default=list(ESTIMATORS))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one CPU thread each)")
    parser.add_argument("--size", choices=SIZES, default="benchmark")
    parser.add_argument("--updates", type=int, default=None, help="override the update count")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--estimator", default="group_mean", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(e, s) for e in args.estimators for s in range(args.seeds)]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(lambda job: _launch(args, *job), jobs))
    results: dict[str, list[Run]] = {}
    for (estimator, _), run in zip(jobs, done, strict=True):
        results.setdefault(estimator, []).append(run)
    minutes = (time.perf_counter() - started) / 60
    plot(results, args.out / "learning.png")
    markdown = table(results)
    noise = noise_report(results) if len(results) > 1 else []
    load = os.getloadavg()
    text = [markdown, "", *(f"- {line}" for line in noise)]
    text.append(f"\nwall time {minutes:.1f} min; load average at the end {load[0]:.2f}")
    (args.out / "learning.md").write_text("\n".join(text) + "\n")
    setup = _setup(args.size, args.estimators[0], 0, args.updates)
    print(f"setup: {setup}")
    print("\n".join(text))
    print(f"wrote {args.out / 'learning.png'}, learning.md, runs/*.json")
    first = results[args.estimators[0]]
    rand = sum(float(r["random_success"]) for r in first) / len(first)
    before = sum(_success(r, 0) for r in first) / len(first)
    after = sum(_success(r, -1) for r in first) / len(first)
    print(
        f"random_success={rand:.3f} success_before={before:.3f} success_after={after:.3f} "
        f"seeds={len(first)} minutes={minutes:.1f}"
    )


if __name__ == "__main__":
    main()
