"""Ablation of advantage estimators: GroupMean, GroupNormalized, LeaveOneOut and GiGPO.

Trains the tiny local model on the toy environment (multi-turn: up to four commands per
episode) with each estimator at the same budget and seeds (`agentrl.backends.local.toy_learning`),
then writes learning curves (PNG), a markdown table and a JSON file:

    python benchmarks/estimators.py --out runs/estimators [--setup multi|single] [--seed 0]

No pass threshold: the numbers are reported in docs/estimators.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from agentrl.advantages import AdvantageEstimator, GiGPO, GroupMean, GroupNormalized, LeaveOneOut
from agentrl.backends.local.toy_learning import (
    MULTI_TURN,
    SINGLE_STEP,
    ToyLearningResult,
    plot_learning_curves,
    run_toy_learning,
)
from agentrl.tokenizer import build_qwen_tokenizer

ESTIMATORS: dict[str, AdvantageEstimator] = {
    "group_mean": GroupMean(),
    "group_normalized": GroupNormalized(),
    "leave_one_out": LeaveOneOut(),
    "gigpo": GiGPO(),
}


def table(results: dict[str, ToyLearningResult], seconds: dict[str, float]) -> str:
    """Markdown table of held-out results before / after training."""
    lines = [
        "| estimator | reward before | reward after | success before | success after "
        "| invalid/turn after | mean training reward | degenerate groups | seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        degenerate = sum(h.degenerate_groups for h in r.history)
        curve = sum(h.reward for h in r.history) / max(len(r.history), 1)
        lines.append(
            f"| {name} | {r.before.reward:+.3f} | {r.after.reward:+.3f} | "
            f"{r.before.success:.1%} | {r.after.success:.1%} | {r.after.invalid_per_turn:.2f} | "
            f"{curve:+.3f} | {degenerate} | {seconds[name]:.0f} |"
        )
    return "\n".join(lines)


async def main() -> None:
    """Run every estimator with the same setup and seeds; write PNG, markdown and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/estimators"))
    parser.add_argument("--setup", choices=("multi", "single"), default="multi")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=None, help="override the update count")
    parser.add_argument("--only", nargs="*", choices=sorted(ESTIMATORS), default=None)
    args = parser.parse_args()
    setup = MULTI_TURN if args.setup == "multi" else SINGLE_STEP
    setup = replace(setup, seed=args.seed, updates=args.updates or setup.updates)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_qwen_tokenizer()
    results: dict[str, ToyLearningResult] = {}
    seconds: dict[str, float] = {}
    for name in args.only or list(ESTIMATORS):
        start = time.perf_counter()
        results[name] = await run_toy_learning(
            setup,
            tokenizer,
            ESTIMATORS[name],
            on_update=lambda u, s, n=name: print(
                f"{n} update {u + 1}: reward {s.reward:+.3f} success {s.success:.0%}", flush=True
            ),
        )
        seconds[name] = time.perf_counter() - start
    plot_learning_curves(results, args.out / "estimators.png")
    markdown = table(results, seconds)
    (args.out / "estimators.md").write_text(markdown + "\n")
    payload = {name: asdict(r) for name, r in results.items()}
    (args.out / "estimators.json").write_text(json.dumps(payload, indent=2))
    print(f"setup: {setup}")
    print(markdown)
    print(f"wrote {args.out / 'estimators.png'}, estimators.md, estimators.json")


if __name__ == "__main__":
    asyncio.run(main())
