"""`agentrl learn --env NAME`: the learning recipe on an env, a small model from scratch on a CPU.

A project tokenizer trained on the env's own text, a Qwen3-architecture model of a few hundred
thousand weights, a warm start on the random valid policy, RL through the Trainer and held-out
evaluations (`agentrl.recipes.learning.learn`; `agentrl.recipes.learnable` names the envs).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from agentrl.cli.args import Subparsers, UsageError

__all__ = ["add_parser", "run"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    """Run `agentrl learn`; the exit status."""
    from agentrl.recipes.learnable import learn_preset, learn_summary, run_learn
    from agentrl.recipes.learning import EvalPoint

    preset = learn_preset(args.env)
    setup = preset.short if args.short else preset.setup
    setup = replace(setup, seed=args.seed)
    if args.updates is not None:
        setup = replace(setup, updates=args.updates, eval_every=min(setup.eval_every, args.updates))
    if args.max_steps is not None:
        setup = replace(setup, max_steps=args.max_steps)
    out: Path = args.out or Path("runs") / "learn" / args.env
    if (out / "result.json").exists() and not args.overwrite:
        raise UsageError(f"{out} holds an earlier run; pass --overwrite or another --out")
    print(f"learning {args.env}: {setup.updates} updates, seed {setup.seed} (held-out success):")

    def point(p: EvalPoint) -> None:
        label = "warm start, before RL; " if p.update == 0 else ""
        print(f"  update {p.update:4d}: {p.success:6.1%}  ({label}{p.seconds:.0f}s)", flush=True)

    result = run_learn(preset, setup, out, on_point=point)
    print(f"random valid policy {result.random_success:.1%}; wrote {out}/result.json, learning.png")
    print(learn_summary(result))
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `learn` command."""
    parser = subparsers.add_parser(
        "learn",
        help="train a small model from scratch on an env by RL (CPU, minutes)",
        description="The learning recipe on one env: a project tokenizer trained on the env's "
        "text, a small from-scratch model, a warm start on the random valid policy, RL through "
        "the Trainer and held-out evaluations. toy-fetch and toy-vault have tuned presets; "
        "any installed env that lists its admissible actions runs with the generic setup.",
    )
    parser.add_argument("--env", required=True, help="env name (toy-fetch, toy-vault, or any)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (runs/learn/ENV)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default: 0)")
    parser.add_argument("--updates", type=_positive, default=None, help="RL updates")
    parser.add_argument("--max-steps", type=_positive, default=None, help="replies per episode")
    parser.add_argument("--short", action="store_true", help="a plumbing run of seconds")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --out")
    parser.set_defaults(handler=run)
