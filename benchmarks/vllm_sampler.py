"""vLLM sampler vs the local backend's builtin sampler on the same multi-turn rollouts.

Both samplers play the same toy games freely (a random model writes no valid tool call, so
every turn is an invalid-format reply and episodes run to the step limit, each turn's prompt
extending the last one like a long agent episode). Reported for each, from one run:
decode tokens/s (completion tokens over the rollout's wall time), rollout wall time, and
prefill tokens per trajectory (what the prefix cache did not serve), and the ratios.

    # CPU (the make test-vllm virtualenv), tiny random model:
    .venv-vllm/bin/python benchmarks/vllm_sampler.py
    # GPU, a Qwen3-0.6B-shaped random model in bf16, 8 games x 8 branches:
    python benchmarks/vllm_sampler.py --device cuda --model qwen3-0.6b --games 8 --group-size 8

No GPU was available when this was written: GPU numbers are still to be measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.local import LocalBackend
from agentrl.backends.local.model import qwen3_config, random_causal_lm, select_device
from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.core.types import TaskInfo
from agentrl.envs.toy import ToyEnvGroup, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch


@dataclass(frozen=True)
class Numbers:
    """One sampler's rollout of the same games."""

    sampler: str
    trajectories: int
    turns_per_trajectory: float
    completion_tokens: int
    prefill_per_trajectory: float
    seconds: float

    @property
    def decode_tokens_per_s(self) -> float:
        """Completion tokens per second of rollout wall time."""
        return self.completion_tokens / self.seconds


async def rollout(
    sampler: Any, args: argparse.Namespace, tokenizer: Any, name: str, seed: int
) -> Numbers:
    """Play `args.games` groups (games from `seed` on) of `args.group_size` branches."""
    protocol = toy_tool_protocol()
    steps = args.max_env_steps

    def make(task: TaskInfo, group_size: int) -> ToyEnvGroup:
        return ToyEnvGroup(task, group_size, max_steps=steps + 1)

    config = RolloutConfig(
        group_size=args.group_size,
        max_env_steps=steps,
        max_trajectory_tokens=args.max_trajectory_tokens,
        max_assistant_tokens=args.decode_tokens,
        sampling=SamplingParams(max_tokens=args.decode_tokens),
    )
    start = time.perf_counter()
    groups = await rollout_batch(
        toy_tasks(args.games, seed=seed),
        env_factory=make,
        sampler=sampler,
        renderer=ChatRenderer(tokenizer, protocol.tools),
        protocol=protocol,
        config=config,
        max_concurrent_groups=args.games,
    )
    seconds = time.perf_counter() - start
    trajectories = [t for g in groups for t in g.trajectories]
    return Numbers(
        sampler=name,
        trajectories=len(trajectories),
        turns_per_trajectory=statistics.mean(len(t.turns) for t in trajectories),
        completion_tokens=sum(t.tokens.completion for t in trajectories),
        prefill_per_trajectory=statistics.mean(t.tokens.prefill for t in trajectories),
        seconds=seconds,
    )


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default="tiny", choices=["tiny", "qwen3-0.6b", "qwen3-4b"])
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-env-steps", type=int, default=6)
    parser.add_argument("--max-trajectory-tokens", type=int, default=4_000)
    parser.add_argument("--decode-tokens", type=int, default=16)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    return parser.parse_args()


async def main() -> None:
    """Build one random model, save it for vLLM, roll out with both samplers."""
    from agentrl.backends.vllm import VllmOptions, VllmSampler

    args = parse_args()
    device = select_device(args.device)
    tokenizer = build_qwen_tokenizer()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    overrides = {"head_dim": 32} if args.model == "tiny" else {}  # vLLM CPU: head_dim >= 32
    config = qwen3_config(args.model, vocab_size=len(tokenizer), **overrides)  # type: ignore[arg-type]
    model = random_causal_lm(config, seed=args.seed, device=device, dtype=dtype)
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        builtin = LocalBackend(model, device=device, tokenizer=tokenizer, seed=args.seed)
        local = await rollout(await builtin.sampler(), args, tokenizer, "builtin", args.seed)
        options = VllmOptions(
            dtype=str(dtype).removeprefix("torch."),
            max_model_len=args.max_trajectory_tokens + args.decode_tokens,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_lora_rank=None,
            seed=args.seed,
        )
        vllm = VllmSampler.start(Path(folder), options)
        try:
            # warm-up on other games: the first calls are slow, and the measured games must not
            # find their prompts in the prefix cache already
            await rollout(vllm, args, tokenizer, "vllm-warmup", args.seed + 10_000)
            served = await rollout(vllm, args, tokenizer, "vllm", args.seed)
        finally:
            await vllm.close()
    rows = [local, served]
    for n in rows:
        print(
            f"{n.sampler:8s} {n.trajectories} trajectories x {n.turns_per_trajectory:.1f} turns: "
            f"{n.decode_tokens_per_s:8.1f} decode tok/s, {n.seconds:7.2f} s rollout, "
            f"{n.prefill_per_trajectory:8.1f} prefill tokens per trajectory"
        )
    print(
        f"decode_speedup={served.decode_tokens_per_s / local.decode_tokens_per_s:.2f} "
        f"rollout_speedup={local.seconds / served.seconds:.2f} "
        f"prefill_ratio={served.prefill_per_trajectory / max(local.prefill_per_trajectory, 1):.2f}"
        f" device={device.type} model={args.model}"
    )
    if args.output:
        payload = [{**asdict(n), "decode_tokens_per_s": n.decode_tokens_per_s} for n in rows]
        Path(args.output).write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
