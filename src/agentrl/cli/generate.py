"""`agentrl generate`: verified ALFWorld games offline, or pycode task files (the `--env`'s
`EnvSpec.generate`)."""

from __future__ import annotations

import argparse

from agentrl.cli.args import Subparsers, UsageError

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Run `agentrl generate`: the `--env`'s `EnvSpec.generate`; the exit status."""
    from agentrl.config.plugins import env_spec

    spec = env_spec(args.env)
    if spec.generate is None:
        raise UsageError(f"the {spec.name} env generates no task files (its EnvSpec has none)")
    return spec.generate(args)


def add_parser(subparsers: Subparsers) -> None:
    """Register the `generate` command."""
    parser = subparsers.add_parser(
        "generate",
        help="generate verified ALFWorld games offline",
        description="Generate ALFWorld-compatible games (official json_2.1.1 layout) from the "
        "floor plans, goals and grammar the alfworld package ships. Each game is played to a "
        "win in TextWorld (or the fast engine, --verify-engine) before it is kept. Rerunning "
        "with the same arguments resumes.",
    )
    parser.add_argument(
        "--env",
        default="alfworld",
        help="an installed env that generates tasks (`agentrl envs`): alfworld: verified games; "
        "pycode: task files <split>.jsonl (id, question, answer)",
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
    parser.add_argument(
        "--task-types",
        default=None,
        help="alfworld: comma-separated task types (default: all six), e.g. "
        "pick_and_place_simple,look_at_obj_in_light",
    )
    parser.add_argument(
        "--max-receptacles",
        type=int,
        default=None,
        help="alfworld: only floor plans with at most this many receptacles (small rooms: 6-13)",
    )
    parser.add_argument(
        "--verify-engine",
        choices=("textworld", "fast"),
        default="textworld",
        help="alfworld: the engine that plays each game's walkthrough before it is kept: the "
        "stock TextWorld one, or the project's byte-identical fast one (the env's default "
        "engine; about 5x quicker to load a game)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=run)
