"""`agentrl view`: a self-contained HTML viewer of an eval file."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrl.cli.args import Subparsers

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Run `agentrl view`; the exit status."""
    from agentrl.reporting.viewer import write_viewer

    if not args.file.is_file():
        raise FileNotFoundError(f"{args.file}: no such eval file")
    out = write_viewer(args.file, args.out)
    print(f"wrote {out}   (open it in a browser; it needs no network)")
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `view` command."""
    parser = subparsers.add_parser(
        "view",
        help="write a self-contained HTML viewer of an eval file",
        description="One HTML file to browse an evaluation game by game: each turn's action, "
        "status and observation.",
    )
    parser.add_argument("file", type=Path, metavar="EVAL_JSONL")
    parser.add_argument("--out", type=Path, help="HTML file (default: next to the eval file)")
    parser.set_defaults(handler=run)
