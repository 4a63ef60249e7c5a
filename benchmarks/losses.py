"""The loss family at the same budget and seeds: PPO, clip-higher, importance sampling, CISPO,
GSPO, Dr. GRPO's constant normalisation, a KL penalty to the reference, and TIS.

Each variant trains the tiny local model on the toy environment with the same warm start,
games, seeds and update count; the experiment is `run_experiment` below, which today calls the
toy learning loop (`agentrl.backends.local.toy_learning.run_toy_learning`, the same loop as
`benchmarks/estimators.py`) and is the one place to re-point at the project's learning
benchmark once that lands. Writes curves (PNG), a markdown table and JSON:

    python benchmarks/losses.py --out runs/losses [--setup single|multi] [--updates N]

Each batch takes `--steps-per-batch` optimizer steps (default 2). With one step the batch is
on-policy: the ratio is 1 where the gradient is taken, so ppo, clip-higher, importance
sampling, CISPO and TIS have the *same* gradient (identical rows are then a check of the
implementations, not a finding); from the second step on the ratios move and the losses
differ. The KL reference is the base model without the adapter, i.e. *before* the supervised
warm start here, so the penalty pulls back towards a model that cannot write commands.

No pass threshold: a tiny model on a toy task says whether a loss trains at all and how fast
at this budget, not which loss is best on ALFWorld.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agentrl.backends.base import KLEstimator, LossConfig, LossName, LossNormalisation
from agentrl.backends.local.toy_learning import (
    MULTI_TURN,
    SINGLE_STEP,
    ToyLearningResult,
    ToyLearningSetup,
    plot_learning_curves,
    run_toy_learning,
)
from agentrl.tokenizer import build_qwen_tokenizer

VARIANTS: dict[str, tuple[LossName, LossConfig]] = {
    "ppo": (LossName.PPO, LossConfig(0.8, 1.2)),
    "ppo_clip_higher": (LossName.PPO, LossConfig(0.8, 1.28)),
    "importance_sampling": (LossName.IMPORTANCE_SAMPLING, LossConfig()),
    "cispo": (LossName.CISPO, LossConfig(0.0 + 1e-6, 1.28)),
    "gspo": (
        LossName.GSPO,
        LossConfig(1 - 3e-3, 1 + 4e-3, normalisation=LossNormalisation.SEQUENCE),
    ),
    "ppo_dr_grpo": (
        LossName.PPO,
        LossConfig(normalisation=LossNormalisation.CONSTANT, norm_constant=256.0),
    ),
    "ppo_kl_k3": (LossName.PPO, LossConfig(kl_coef=0.05, kl_estimator=KLEstimator.K3)),
    "ppo_tis": (LossName.PPO, LossConfig(tis_cap=2.0)),
}
"""Name -> (loss, config). GSPO's clip range is on the sequence ratio, hence much narrower;
CISPO clips only from above (the lower bound is effectively off); Dr. GRPO's constant is the
setup's token budget per update (64 trajectories x ~4 assistant tokens)."""


async def run_experiment(
    setup: ToyLearningSetup,
    tokenizer: Any,
    loss: LossName,
    config: LossConfig,
    name: str,
    steps_per_batch: int,
) -> ToyLearningResult:
    """One training run of `loss` (re-point this at the project's learning benchmark)."""
    return await run_toy_learning(
        setup,
        tokenizer,
        on_update=lambda u, s: print(
            f"{name} update {u + 1}: reward {s.reward:+.3f} success {s.success:.0%}", flush=True
        ),
        loss=loss,
        loss_config=config,
        steps_per_batch=steps_per_batch,
    )


def table(results: dict[str, ToyLearningResult], seconds: dict[str, float]) -> str:
    """Markdown table: held-out reward before / after, mean training reward, time."""
    lines = [
        "| loss | reward before | reward after | after / ppo | success after "
        "| invalid/turn after | mean training reward | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = results["ppo"].after.reward - results["ppo"].before.reward if "ppo" in results else 0
    for name, r in results.items():
        gain = r.after.reward - r.before.reward
        relative = f"{gain / base:.2f}" if base else "-"
        curve = sum(h.reward for h in r.history) / max(len(r.history), 1)
        lines.append(
            f"| {name} | {r.before.reward:+.3f} | {r.after.reward:+.3f} | {relative} | "
            f"{r.after.success:.1%} | {r.after.invalid_per_turn:.2f} | {curve:+.3f} | "
            f"{seconds[name]:.0f} |"
        )
    return "\n".join(lines)


async def main() -> None:
    """Run every loss with the same setup and seeds; write PNG, markdown and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/losses"))
    parser.add_argument("--setup", choices=("single", "multi"), default="single")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=None, help="override the update count")
    parser.add_argument("--only", nargs="*", choices=sorted(VARIANTS), default=None)
    parser.add_argument(
        "--steps-per-batch",
        type=int,
        default=2,
        help="optimizer steps per batch (1: on-policy, where ppo / is / cispo / tis coincide)",
    )
    args = parser.parse_args()
    setup = SINGLE_STEP if args.setup == "single" else MULTI_TURN
    setup = replace(setup, seed=args.seed, updates=args.updates or setup.updates)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_qwen_tokenizer()
    results: dict[str, ToyLearningResult] = {}
    seconds: dict[str, float] = {}
    for name in args.only or list(VARIANTS):
        loss, config = VARIANTS[name]
        start = time.perf_counter()
        results[name] = await run_experiment(
            setup, tokenizer, loss, config, name, args.steps_per_batch
        )
        seconds[name] = time.perf_counter() - start
    plot_learning_curves(results, args.out / "losses.png", legend_fontsize=7)
    markdown = table(results, seconds)
    (args.out / "losses.md").write_text(markdown + "\n")
    payload = {name: asdict(r) for name, r in results.items()}
    (args.out / "losses.json").write_text(json.dumps(payload, indent=2))
    print(f"setup: {setup}, steps per batch: {args.steps_per_batch}")
    print(markdown)
    print(f"wrote {args.out / 'losses.png'}, losses.md, losses.json")


if __name__ == "__main__":
    asyncio.run(main())
