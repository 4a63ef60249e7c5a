"""`agentrl eval`: evaluate the base model, a checkpoint or a baseline into one eval JSONL file
(one flag per field of `EvalConfig`)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from agentrl.cli.args import Subparsers, add_config_arguments, config_from_args
from agentrl.config import EvalConfig, EvalPolicy
from agentrl.training.interrupts import run_until_signal

__all__ = ["add_parser", "run"]


async def _eval(config: EvalConfig) -> int:
    from agentrl.evaluation import evaluate
    from agentrl.reporting.sinks import MultiSink, format_table, tracker_sinks

    trackers = tracker_sinks(
        config.output.parent,
        experiment_name=config.experiment_name or config.output.stem,
        swanlab_mode=config.swanlab_mode,
        swanlab_project=config.swanlab_project,
        wandb_mode=config.wandb_mode,
        wandb_project=config.wandb_project,
        config=config.model_dump(mode="json"),
    )
    sinks = MultiSink(trackers) if trackers else None
    if config.policy is EvalPolicy.MODEL:
        from agentrl.config.presets import preset_line

        print(preset_line(config))
    try:
        outcome = await evaluate(config, sinks=sinks)
    except (asyncio.CancelledError, KeyboardInterrupt):
        print(
            f"\ninterrupted; the finished episodes are in {config.output}. Finish it with the "
            "same command plus --resume.",
            file=sys.stderr,
        )
        raise KeyboardInterrupt from None
    finally:
        if sinks is not None:
            sinks.close()
    print(f"\n{outcome.label}: {outcome.played} episodes played, {outcome.skipped} resumed")
    print(format_table(outcome.summaries))
    print(f"wrote {outcome.path}   (view it: agentrl view {outcome.path})")
    errors = outcome.summaries[-1].stats.stop_reasons if outcome.summaries else {}
    failed = {k: n for k, n in errors.items() if k in ("env_error", "sampler_error")}
    if failed:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(failed.items()))
        print(
            f"warning: {counts} episodes (counted as failures, column 'errors'); play them "
            "again with the same command plus --resume --retry-errors",
            file=sys.stderr,
        )
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `agentrl eval` with the parsed flags; the exit status."""
    config = config_from_args(EvalConfig, args)
    return run_until_signal(_eval(config))


def add_parser(subparsers: Subparsers) -> None:
    """Register the `eval` command."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate the base model, a checkpoint or the planner baseline",
        description="Play every validation game of --split once (temperature 0.01, seed 42 by "
        "default), --games-per-batch at a time, and write one JSONL file with every episode "
        "and a summary per split, overall and per task type. An existing --output is never "
        "replaced unless --overwrite-output; --resume finishes an interrupted evaluation.",
    )
    add_config_arguments(parser, EvalConfig)
    parser.set_defaults(handler=run)
