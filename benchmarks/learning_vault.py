"""The learning recipe on the vault task: recall a code told once, several replies later.

Runs `agentrl.recipes.learning.learn` on `agentrl.recipes.vault.vault_learning_env` (the vault
env's `EnvSpec` through the recipe's generic path: its own tokenizer, plain commands over its
listed actions, a warm start on the random valid policy, RL through the Trainer) for every
variant and seed, each run in its own process (`--threads` torch threads), `--jobs` at a time.
Writes `learning_vault.png` (held-out success per update, mean over seeds, min-max band),
`learning_vault.md` (a row per run and per variant: random policy, before RL, after RL, the
first update at >= 90%, minutes, the load average when the run ended) and `runs/*.json`. The
last line printed is

    task=vault random_success=R success_before=B success_after=A seeds=N minutes=M

(held-out success, means over seeds, of the first variant listed; minutes of wall time).

    python benchmarks/learning_vault.py --out runs/vault                       # the recipe, 3 seeds
    python benchmarks/learning_vault.py --out runs/vault --variants recipe fetch_setup --jobs 2
    python benchmarks/learning_vault.py --out runs/vault_all --variants all_demos --updates 450
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import learning_runs

from agentrl.recipes.learning import LearningSetup
from agentrl.recipes.vault import THREADS, VAULT, VAULT_SMOKE

Run = dict[str, Any]
FETCH_MODEL = dict(hidden_size=64, heads=4, games_per_batch=8, group_size=8, sft_batch=32)
"""The fetch recipe's model, batch and warm-start batch (`agentrl.recipes.fetch.BENCHMARK`)."""


def _fetch_setup(setup: LearningSetup) -> LearningSetup:
    """The vault run with the fetch recipe's model and batch (same seed, budget and games)."""
    if setup.updates <= VAULT_SMOKE.updates:  # the smoke size keeps its tiny batch
        return replace(setup, hidden_size=64, heads=4)
    return replace(setup, **FETCH_MODEL)  # type: ignore[arg-type]


VARIANTS: dict[str, Callable[[LearningSetup], LearningSetup]] = {
    "recipe": lambda setup: setup,
    "fetch_setup": _fetch_setup,
    "all_demos": lambda setup: replace(setup, warm_winners_only=False),
}


def _setup(args: argparse.Namespace, variant: str, seed: int) -> LearningSetup:
    base = replace(VAULT_SMOKE if args.size == "smoke" else VAULT, seed=seed)
    base = replace(base, updates=args.updates) if args.updates else base
    return VARIANTS[variant](base)


def _worker(args: argparse.Namespace) -> None:
    import torch

    from agentrl.recipes.learning import learn
    from agentrl.recipes.vault import vault_learning_env

    torch.set_num_threads(args.threads)
    setup = _setup(args, args.variant, args.seed)
    name = f"{args.variant}-seed{args.seed}"
    result = asyncio.run(
        learn(
            vault_learning_env(setup),
            setup,
            args.out / "work" / name,
            on_point=lambda p: print(f"{name} {p}", flush=True),
        )
    )
    data = asdict(result) | {"load_at_end": os.getloadavg()[0], "threads": args.threads}
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    (args.out / "runs" / f"{name}.json").write_text(json.dumps(data, indent=2))


def per_seed_table(results: dict[str, list[Run]]) -> str:
    """Markdown: one row per run, then each variant's mean ± std (sample) and min-max."""
    lines = [
        "| variant | seed | random policy | before RL | after RL | first update >= 90% "
        "| minutes | load at end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in results.items():
        for run in runs:
            first = learning_runs.or_dash(learning_runs.first_at(run, 0.9))
            lines.append(
                f"| {name} | {run['setup']['seed']} | {run['random_success']:.1%} | "
                f"{learning_runs.success(run, 0):.1%} | {learning_runs.success(run, -1):.1%} | "
                f"{first} | {run['seconds'] / 60:.1f} | "
                f"{run['load_at_end']:.1f} |"
            )
        cells = []
        for value in (
            lambda r: float(r["random_success"]),
            lambda r: learning_runs.success(r, 0),
            lambda r: learning_runs.success(r, -1),
        ):
            values = [value(r) for r in runs]
            mean, std = learning_runs.mean_std(values)
            cells.append(f"{mean:.1%} ± {std:.1%} ({min(values):.0%}-{max(values):.0%})")
        minutes = learning_runs.mean_std([float(r["seconds"]) / 60 for r in runs])[0]
        lines.append(f"| **{name}** | mean | {' | '.join(cells)} | | {minutes:.1f} | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """The benchmark's command line (`--worker`: be one run)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/learning_vault"))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once")
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads per run")
    parser.add_argument("--size", choices=("benchmark", "smoke"), default="benchmark")
    parser.add_argument("--updates", type=int, default=None, help="override the update count")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["recipe"])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--variant", choices=list(VARIANTS), default="recipe", help=argparse.SUPPRESS
    )
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args)
        return
    results, minutes = learning_runs.run_all(Path(__file__), args, args.variants)
    title = "vault task: held-out success (mean over seeds, min-max band)"
    learning_runs.plot(results, args.out / "learning_vault.png", title)
    text = [per_seed_table(results), ""]
    text.append(f"setup ({args.variants[0]}): {_setup(args, args.variants[0], 0)}")
    text.append(f"wall time {minutes:.1f} min; load average at the end {os.getloadavg()[0]:.2f}")
    (args.out / "learning_vault.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    first = results[args.variants[0]]
    means = [
        sum(value(r) for r in first) / len(first)
        for value in (
            lambda r: float(r["random_success"]),
            lambda r: learning_runs.success(r, 0),
            lambda r: learning_runs.success(r, -1),
        )
    ]
    print(
        f"task=vault random_success={means[0]:.3f} success_before={means[1]:.3f} "
        f"success_after={means[2]:.3f} seeds={len(first)} minutes={minutes:.1f}"
    )


if __name__ == "__main__":
    main()
