"""The `agentrl` command line: one small function per subcommand.

Subcommands: `generate` (offline ALFWorld games). Add a subcommand by writing an
`_add_<name>(subparsers)` function that registers its parser and sets `handler`, and listing
it in `_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["build_parser", "main"]


def _run_generate(args: argparse.Namespace) -> int:
    from agentrl.envs.alfworld.data import TASK_TYPES
    from agentrl.envs.alfworld.generate import generate_games

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


def _add_generate(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate verified ALFWorld games offline",
        description="Generate ALFWorld-compatible games (official json_2.1.1 layout) from the "
        "floor plans, goals and grammar the alfworld package ships. Each game is played to a "
        "win in TextWorld before it is kept. Rerunning with the same arguments resumes.",
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
    parser.set_defaults(handler=_run_generate)


_SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    _add_generate,
)


def build_parser() -> argparse.ArgumentParser:
    """The `agentrl` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="agentrl", description="Multi-turn agentic RL for tool-using LLM agents."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `agentrl` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
