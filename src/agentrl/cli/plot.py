"""`agentrl plot`: compare eval files in PNG charts (and a CSV)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrl.cli.args import Subparsers, UsageError

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Run `agentrl plot`; the exit status."""
    from agentrl.reporting.plots import plot_eval_files

    labels = args.labels.split(",") if args.labels else None
    if labels is not None and len(labels) != len(args.files):
        raise UsageError(f"--labels has {len(labels)} names for {len(args.files)} files")
    for path in args.files:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such eval file")
    written = plot_eval_files(args.files, args.out, labels)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `plot` command."""
    parser = subparsers.add_parser(
        "plot",
        help="compare eval files in PNG charts",
        description="Compare any number of eval JSONL files (in the order given): success per "
        "split, overall success against invalid actions, success per task type; plus a CSV.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="EVAL_JSONL")
    parser.add_argument("--out", type=Path, default=Path("plots"), help="output folder")
    parser.add_argument("--labels", help="comma-separated names (default: from the files)")
    parser.set_defaults(handler=run)
