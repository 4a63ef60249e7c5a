"""`agentrl serve`: serve a model through the OpenAI-compatible gateway and record every episode.

Any agent that speaks OpenAI's chat-completions API can use it: `POST /sessions` opens an episode
(its base URL comes back), the agent calls `<base_url>/chat/completions`, and
`POST /sessions/{id}/end` with `{"reward": R, "won": B}` ends it: its trajectory (exact tokens
and logprobs) is appended to `<out>/trajectories.jsonl`. A call naming an unknown session opens
it (so a fixed URL `/s/NAME/v1` also works). Only loopback is bound unless `--host` says
otherwise. To train an agent, use `agentrl train --agent MODULE:FUNCTION` (docs/gateway.md).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from agentrl.cli.args import Subparsers, add_config_arguments, config_from_args
from agentrl.config import EvalConfig
from agentrl.core.types import Trajectory
from agentrl.training.interrupts import run_until_signal

__all__ = ["add_parser", "run"]

SERVED_FIELDS = (
    "base_model",
    "model_path",
    "backend",
    "device",
    "tokenizer_path",
    "chat_template",
    "tool_dialect",
    "enable_thinking",
    "allow_history_rewrite",
    "temperature",
    "top_p",
    "seed",
    "max_trajectory_tokens",
    "max_assistant_tokens",
)
"""The `EvalConfig` fields `serve` takes as flags (the model, its template, sampling, budgets)."""


async def _serve(config: EvalConfig, host: str, port: int, out: Path) -> int:
    from agentrl.gateway import Gateway, GatewayServer
    from agentrl.store.records import TrajectoryRecord, append_records
    from agentrl.training import recipe
    from agentrl.training.build import renderer_for_tools, rollout_config_for

    out.mkdir(parents=True, exist_ok=True)
    records = out / "trajectories.jsonl"
    tokenizer = recipe.tokenizer_for(config)
    sampler = await recipe.eval_sampler_for(config, tokenizer)
    rollout = rollout_config_for(config, 1, config.sampling_params())
    gateway = Gateway(
        lambda tools: renderer_for_tools(tokenizer, tools, config),
        sampler=sampler,
        config=rollout,
        model=config.base_model,
        open_sessions=True,
    )

    def write(trajectory: Trajectory) -> None:
        append_records(records, [TrajectoryRecord.from_trajectory(trajectory, include_tokens=True)])

    try:
        async with GatewayServer(gateway, host=host, port=port, on_trajectory=write) as server:
            print(f"serving {config.base_model} at {server.base_url}/v1 (sessions: POST /sessions)")
            print(f"episodes ended with POST /sessions/ID/end are appended to {records}")
            await asyncio.Event().wait()
    finally:
        close = getattr(sampler, "close", None)
        if close is not None:
            await close()
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `agentrl serve` with the parsed flags; the exit status."""
    out: Path = args.out
    config = config_from_args(EvalConfig, args, output=out / "unused-eval.jsonl")
    return run_until_signal(_serve(config, args.host, args.port, out))


def add_parser(subparsers: Subparsers) -> None:
    """Register the `serve` command."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a model through the OpenAI-compatible gateway, recording exact tokens",
        description="Serve --base-model (or the checkpoint --model-path) at an OpenAI-compatible "
        "endpoint: POST /v1/chat/completions (tools, streaming, logprobs). Each episode is a "
        "session (/s/ID/v1, or the API key ID); ending it with POST /sessions/ID/end {reward, "
        "won} appends its trajectory, token for token, to OUT/trajectories.jsonl.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: a free one)")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/serve"), help="folder of trajectories.jsonl"
    )
    exclude = [name for name in EvalConfig.model_fields if name not in SERVED_FIELDS]
    add_config_arguments(parser, EvalConfig, exclude=exclude)
    parser.set_defaults(handler=run)
