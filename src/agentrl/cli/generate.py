"""`agentrl generate`: verified ALFWorld games offline, or pycode task files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrl.cli.args import Subparsers, UsageError

__all__ = ["add_parser", "run"]


def _run_pycode_generate(args: argparse.Namespace) -> int:
    from agentrl.envs.pycode import write_tasks

    counts = {"train": args.train, "valid_seen": args.valid_seen, "valid_unseen": args.valid_unseen}
    counts = {split: n for split, n in counts.items() if n > 0}
    if not counts:
        raise UsageError("give at least one of --train, --valid-seen, --valid-unseen")
    for path in write_tasks(Path(args.out), counts):
        print(f"wrote {path}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `agentrl generate`; the exit status."""
    if args.env == "pycode":
        return _run_pycode_generate(args)
    from agentrl.envs.alfworld.data import TASK_TYPES
    from agentrl.envs.alfworld.generate import generate_games

    if not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    report = generate_games(
        args.out,
        train=args.train,
        valid_seen=args.valid_seen,
        valid_unseen=args.valid_unseen,
        seed=args.seed,
        workers=args.workers,
        timeout=args.timeout,
        progress=not args.quiet,
    )
    counts = report.counts()
    width = max(len(t) for t in TASK_TYPES)
    print(
        f"wrote {len(report.games)} games to {report.root} in {report.seconds:.1f}s "
        f"({report.discarded} candidates discarded)"
    )
    for split, per_type in counts.items():
        print(f"  {split} ({sum(per_type.values())})")
        for task_type, n in per_type.items():
            print(f"    {task_type:<{width}}  {n}")
    requested = args.train + args.valid_seen + args.valid_unseen
    if len(report.games) < requested:
        print(
            f"error: only {len(report.games)} of {requested} games passed verification; "
            "last failures:\n  " + "\n  ".join(report.failures[-5:]),
            file=sys.stderr,
        )
        return 1
    print(f"use them with: find_games({str(report.root)!r})  or  ALFWORLD_DATA={report.root}")
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `generate` command."""
    parser = subparsers.add_parser(
        "generate",
        help="generate verified ALFWorld games offline",
        description="Generate ALFWorld-compatible games (official json_2.1.1 layout) from the "
        "floor plans, goals and grammar the alfworld package ships. Each game is played to a "
        "win in TextWorld before it is kept. Rerunning with the same arguments resumes.",
    )
    parser.add_argument(
        "--env",
        choices=["alfworld", "pycode"],
        default="alfworld",
        help="alfworld: verified games; pycode: task files <split>.jsonl (id, question, answer)",
    )
    parser.add_argument("--out", required=True, help="data root to write (json_2.1.1/ inside)")
    parser.add_argument("--train", type=int, default=0, help="number of train games")
    parser.add_argument("--valid-seen", type=int, default=0, help="valid_seen games (seen rooms)")
    parser.add_argument(
        "--valid-unseen", type=int, default=0, help="valid_unseen games (rooms train never uses)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (output is deterministic)")
    parser.add_argument("--workers", type=int, default=None, help="verification processes")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to verify one game before discarding it",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)
