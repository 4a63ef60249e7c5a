"""`agentrl envs`: the installed environments (the `agentrl.envs` entry points): name, summary,
splits, the config fields each reads and the distribution it comes from."""

from __future__ import annotations

import argparse

from agentrl.cli.args import Subparsers
from agentrl.config.plugins import ENTRY_POINT_GROUP, env_names, env_source, env_spec

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Run `agentrl envs`; the exit status."""
    names = env_names()
    for name in names:
        source = env_source(name)
        spec = env_spec(name)
        print(f"{spec.name}  {spec.summary}")
        print(f"    splits: {', '.join(spec.splits) or '-'}")
        if spec.policies:
            label = "baseline" if len(spec.policies) == 1 else "baselines"
            print(f"    {label}: --policy {' | '.join(spec.policies)} (eval)")
        if args.verbose:
            print(f"    config fields: {', '.join(spec.config_fields) or '-'}")
        print(f"    from: {source.distribution} ({source.value})")
    print(f"{len(names)} envs installed; use one with `agentrl train --env NAME`")
    return 0


def add_parser(subparsers: Subparsers) -> None:
    """Register the `envs` command."""
    parser = subparsers.add_parser(
        "envs",
        help="list the installed environments",
        description=f"List the environments installed as {ENTRY_POINT_GROUP} entry points "
        "(agentrl's own and any package's): name, summary, splits and where each comes from. "
        f'A package adds one with [project.entry-points."{ENTRY_POINT_GROUP}"] in its '
        "pyproject.toml (docs/custom-environment.md).",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="also list the config fields each env reads"
    )
    parser.set_defaults(handler=run)
