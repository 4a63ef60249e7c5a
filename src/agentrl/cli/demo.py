"""`agentrl demo`: the whole recipe in a few minutes on a CPU, no account needed."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrl.cli.args import Subparsers

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Run `agentrl demo`; the exit status."""
    from agentrl.recipes.demo import DEMO_SIZES, run_demo

    report = run_demo(args.out, DEMO_SIZES[args.size], overwrite=args.overwrite)
    print(report.describe())
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `demo` command."""
    from agentrl.recipes.demo import DEMO_SIZES

    parser = subparsers.add_parser(
        "demo",
        help="the whole recipe in a few minutes on a CPU, no account needed",
        description="Generate a small ALFWorld game set, train a few updates of the tiny "
        "random-initialised model with the local backend, evaluate the base model and the "
        "last checkpoint on the generated validation games, and write the plot and the viewer.",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    parser.add_argument(
        "--size", choices=sorted(DEMO_SIZES), default="default", help="how much to run"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier demo in --out")
    parser.set_defaults(handler=run)
