"""`agentrl sft`: supervised fine-tuning on a JSONL of conversations (OpenAI messages format),
the loss on the assistant's tokens only (`agentrl.training.sft`)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from agentrl.cli.args import Subparsers, add_config_arguments, config_from_args
from agentrl.cli.train import interrupted
from agentrl.config import TrainConfig
from agentrl.config.sft import SFT_TRAIN_FIELDS, SftOptions
from agentrl.training.interrupts import run_until_signal

__all__ = ["add_parser", "run"]


async def _sft(config: TrainConfig, options: SftOptions) -> int:
    from agentrl.store.lock import check_not_in_use
    from agentrl.training import build, sft

    check_not_in_use(config.run_dir, what="run folder", folder=True)
    tokenizer = build.tokenizer_for(config)
    renderer = build.renderer_for_tools(tokenizer, (), config)
    budget = config.max_trajectory_tokens

    def examples(path: Path) -> list[sft.SftExample]:
        conversations = sft.read_conversations(path, renderer.dialect)
        return sft.sft_examples(conversations, renderer, max_tokens=budget)

    everything = examples(options.data)
    if options.eval_data is not None:
        train, held_out = everything, examples(options.eval_data)
    else:
        train, held_out = sft.held_out_split(everything, options.eval_fraction, config.seed)
    steps = len(sft.step_batches(len(train), options.batch_size, options.epochs, config.seed))
    tokens = sum(e.tokens for e in train)
    print(
        f"sft: {len(train)} training conversations ({tokens:,} assistant tokens), "
        f"{len(held_out)} held out; {options.epochs} epoch(s), {steps} steps of "
        f"{options.batch_size}"
    )
    backend = await build.training_backend_for(config, tokenizer)
    trainer = sft.SupervisedTrainer(
        config=config, options=options, backend=backend, train=train, held_out=held_out
    )
    try:
        result = await trainer.run()
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise interrupted("step", trainer.completed, trainer.last_saved) from None
    finally:
        await backend.close()
    losses = [s.eval_loss for s in result.steps if s.eval_loss is not None]
    if result.first_eval_loss is not None and losses:
        print(f"eval loss per assistant token: {result.first_eval_loss:.4f} -> {losses[-1]:.4f}")
    print(f"finished step {result.last_step} of {steps}; run folder {config.run_dir}")
    for info in result.checkpoints:
        record = config.run_dir / "checkpoints" / f"{info.name}.json"
        print(f"  {info.name}: --model-path {record}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `agentrl sft` with the parsed flags; the exit status."""
    options = config_from_args(SftOptions, args)
    defaults = {} if hasattr(args, "run_dir") else {"run_dir": Path("runs/sft")}
    config = config_from_args(TrainConfig, args, learning_rate=options.learning_rate, **defaults)
    return run_until_signal(_sft(config, options))


def add_parser(subparsers: Subparsers) -> None:
    """Register the `sft` command."""
    parser = subparsers.add_parser(
        "sft",
        help="supervised fine-tuning on a JSONL of conversations (assistant tokens only)",
        description="Fine-tune on conversations in the OpenAI chat format (one "
        '{"messages": [...], "tools": [...]} per line; assistant tool calls become the '
        "family's call text): the cross-entropy loss on assistant tokens only, --batch-size "
        "conversations per step, --epochs passes, the eval loss on held-out conversations, "
        "checkpoints every --save-every steps and at the end (--model-path of agentrl eval), "
        "--resume after an interrupt.",
    )
    add_config_arguments(parser, SftOptions)
    exclude = [name for name in TrainConfig.model_fields if name not in SFT_TRAIN_FIELDS]
    add_config_arguments(parser, TrainConfig, exclude=[*exclude, "learning_rate"])
    parser.set_defaults(handler=run)
