"""Local backend: prefill with KV-cache reuse vs re-prefill, decode and train throughput.

Episodes are real multi-turn rollouts of the toy environment through the rollout engine, the
toy's `toy_step` tool protocol (tool-call markup, admissible-action lists) and the real Qwen
tokenizer. A random model writes no valid tool calls, so the *text* of each reply comes from
a scripted policy (a uniformly random admissible command, never `drop`, so episodes run to the
step limit like long LLM episodes) and the local model is **teacher-forced** on it: it does
the same work, prefill and per-token decoding, as if it had sampled those tokens. Each
measurement runs the baseline in the same process, and results are reported as ratios:

1. prefill tokens per trajectory and rollout wall time, with the per-trajectory KV cache
   (each turn prefills only the tokens added since the last one) vs without it (each turn
   re-prefills its whole prompt, as the published PyTRIO run was billed: 843.51M prefill
   tokens against 62.24M train tokens, 13.6x);
2. decode tokens/s of free sampling, K branches x G groups batched together vs the same
   requests one at a time;
3. train tokens/s of `forward_backward(ppo)` + `optim_step` on the rollout datums.

    PYTHONPATH=src python benchmarks/local_backend.py                   # CPU, tiny model
    PYTHONPATH=src python benchmarks/local_backend.py --device cuda --model qwen3-0.6b
    PYTHONPATH=src python benchmarks/local_backend.py --device cuda --model qwen3-4b --games 8

`--device cuda` builds a randomly initialised model with the public Qwen3-0.6B / 4B shapes
(bf16, LoRA rank 32 on attention, MLP and unembedding). Add `--output results.json` to keep
the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from agentrl.algo.advantages import GroupMean
from agentrl.algo.datums import Datum, build_datums
from agentrl.backends.base import AdamParams, LossConfig, LossName, SamplingParams
from agentrl.backends.local import LocalBackend, LocalSampler, LoraSpec
from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.core.types import Completion, TaskInfo, TrajectoryGroup
from agentrl.envs.toy import ToyEnvGroup, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch

ACTIONS = re.compile(r"^([a-z][^\n<]*)", flags=re.MULTILINE)
HEADING = "Available actions (copy one exactly):"


class ReplaySampler:
    """Teacher-forces a `LocalSampler` on a scripted policy's tool calls (see module doc)."""

    def __init__(self, local: LocalSampler, tokenizer: Any, seed: int) -> None:
        self.local = local
        self.tokenizer = tokenizer
        self.protocol = toy_tool_protocol()
        self.rng = random.Random(seed)

    def _reply(self, prompt: Sequence[int], stop: int) -> list[int]:
        text = self.tokenizer.decode(list(prompt[-400:]), skip_special_tokens=False)
        actions = ACTIONS.findall(text.rsplit(HEADING, 1)[-1])
        choices = [a for a in actions if not a.startswith("drop")] or ["look"]
        call = self.protocol.call_text(self.rng.choice(choices))
        return [*self.tokenizer.encode(call, add_special_tokens=False), stop]

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` scripted replies, scored (and costed) by the local model."""
        replies = [self._reply(prompt_tokens, params.stop_tokens[0]) for _ in range(num_samples)]
        result = await self.local.sample_detailed(
            prompt_tokens, num_samples, params, forced=replies
        )
        return result.completions


@dataclass(frozen=True)
class RolloutNumbers:
    """One rollout pass (with or without KV reuse)."""

    kv_reuse: bool
    trajectories: int
    turns_per_trajectory: float
    tokens_per_trajectory: float
    """Final sequence length (what a datum trains on)."""
    prefill_per_trajectory: float
    """Prompt tokens the sampler computed, summed over turns (shared turn-1 prefill counted once
    per group, on its first branch)."""
    seconds: float


def toy_factory(max_steps: int) -> Any:
    """An EnvGroupFactory for toy games with a longer step limit."""

    def make(task: TaskInfo, group_size: int) -> ToyEnvGroup:
        return ToyEnvGroup(task, group_size, max_steps=max_steps)

    return make


async def rollouts(
    backend: LocalBackend, args: argparse.Namespace, tokenizer: Any, reuse: bool
) -> tuple[RolloutNumbers, list[TrajectoryGroup]]:
    """Play `args.games` groups with a fresh sampler (cache on or off)."""
    local = LocalSampler(backend.engine, reuse_kv=reuse, kv_cache_gib=args.kv_cache_gib)
    sampler = ReplaySampler(local, tokenizer, seed=args.seed)
    config = RolloutConfig(
        group_size=args.group_size,
        max_env_steps=args.max_env_steps,
        max_trajectory_tokens=args.max_trajectory_tokens,
    )
    start = time.perf_counter()
    groups = await rollout_batch(
        toy_tasks(args.games, seed=args.seed),
        env_factory=toy_factory(args.max_env_steps + 1),
        sampler=sampler,
        renderer=ChatRenderer(tokenizer, toy_tool_protocol().tools),
        protocol=toy_tool_protocol(),
        config=config,
        max_concurrent_groups=args.games,
        progress=True,
    )
    seconds = time.perf_counter() - start
    trajectories = [t for g in groups for t in g.trajectories]
    numbers = RolloutNumbers(
        kv_reuse=reuse,
        trajectories=len(trajectories),
        turns_per_trajectory=statistics.mean(len(t.turns) for t in trajectories),
        tokens_per_trajectory=statistics.mean(t.tokens.total for t in trajectories),
        prefill_per_trajectory=statistics.mean(t.tokens.prefill for t in trajectories),
        seconds=seconds,
    )
    return numbers, groups


async def decode_throughput(
    backend: LocalBackend, prompts: list[list[int]], args: argparse.Namespace, batched: bool
) -> float:
    """Sampled tokens per second: all groups at once (K rows each) or one request at a time."""
    sampler = LocalSampler(backend.engine, reuse_kv=False, max_batch_rows=args.max_batch_rows)
    params = SamplingParams(max_tokens=args.decode_tokens, stop_tokens=(-1,), seed=args.seed)
    start = time.perf_counter()
    if batched:
        results = await asyncio.gather(
            *(sampler.sample(p, args.group_size, params) for p in prompts)
        )
        completions = [c for r in results for c in r]
    else:
        completions = []
        for p in prompts:
            for _ in range(args.group_size):
                completions.extend(await sampler.sample(p, 1, params))
    seconds = time.perf_counter() - start
    return sum(len(c.tokens) for c in completions) / seconds


async def train_throughput(
    backend: LocalBackend, datums: list[Datum], repeats: int
) -> tuple[float, float]:
    """(all tokens/s, trained assistant tokens/s) of forward_backward(ppo) + optim_step."""
    adam = AdamParams(learning_rate=1e-6)
    start = time.perf_counter()
    for _ in range(repeats):
        await backend.forward_backward(datums, LossName.PPO, LossConfig())
        await backend.optim_step(adam)
    seconds = time.perf_counter() - start
    tokens = repeats * sum(len(d) for d in datums)
    trained = repeats * sum(d.num_assistant_tokens for d in datums)
    return tokens / seconds, trained / seconds


def training_datums(groups: list[TrajectoryGroup], seed: int) -> list[Datum]:
    """Datums of the rollouts with random rewards (scripted episodes all score the same)."""
    rng = np.random.default_rng(seed)
    rescored = []
    for group in groups:
        trajectories = tuple(replace(t, reward=float(rng.normal())) for t in group.trajectories)
        rescored.append(TrajectoryGroup(group.group_id, group.task, trajectories))
    return build_datums(rescored, GroupMean().estimate(rescored))


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--model", default=None, choices=["tiny", "qwen3-0.6b", "qwen3-4b"])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-env-steps", type=int, default=20)
    parser.add_argument("--max-trajectory-tokens", type=int, default=12_000)
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--max-batch-rows", type=int, default=64)
    parser.add_argument("--train-repeats", type=int, default=2)
    parser.add_argument("--micro-batch-tokens", type=int, default=8192)
    parser.add_argument(
        "--kv-cache-gib", type=float, default=None, help="default: see LocalSampler"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if args.model is None:
        args.model = "qwen3-0.6b" if args.device == "cuda" else "tiny"
    return args


async def main() -> None:
    """Run the three measurements and print them side by side."""
    args = parse_args()
    torch.manual_seed(args.seed)
    tokenizer = build_qwen_tokenizer()
    backend = LocalBackend.tiny(
        tokenizer,
        size=args.model,
        seed=args.seed,
        device=args.device,
        lora=LoraSpec(rank=32, alpha=32),
        micro_batch_tokens=args.micro_batch_tokens,
        max_batch_rows=args.max_batch_rows,
    )
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "none"
    print(f"model {args.model} on {args.device} (GPU: {gpu}), dtype {backend.engine.dtype}")
    with_cache, groups = await rollouts(backend, args, tokenizer, reuse=True)
    without, _ = await rollouts(backend, args, tokenizer, reuse=False)
    prompts = [list(g.trajectories[0].turns[0].prompt_tokens) for g in groups]
    batched = await decode_throughput(backend, prompts, args, batched=True)
    sequential = await decode_throughput(backend, prompts, args, batched=False)
    datums = training_datums(groups, args.seed)
    train_all, train_trained = await train_throughput(backend, datums, args.train_repeats)
    results = {
        "model": args.model,
        "device": args.device,
        "gpu": gpu,
        "rollout_with_kv_reuse": asdict(with_cache),
        "rollout_without_kv_reuse": asdict(without),
        "prefill_ratio_without_over_with": without.prefill_per_trajectory
        / with_cache.prefill_per_trajectory,
        "rollout_speedup_with_kv_reuse": without.seconds / with_cache.seconds,
        "prefill_over_train_tokens_without_reuse": without.prefill_per_trajectory
        / without.tokens_per_trajectory,
        "prefill_over_train_tokens_with_reuse": with_cache.prefill_per_trajectory
        / with_cache.tokens_per_trajectory,
        "decode_tokens_per_s_batched": batched,
        "decode_tokens_per_s_one_at_a_time": sequential,
        "decode_batching_speedup": batched / sequential,
        "train_tokens_per_s": train_all,
        "train_assistant_tokens_per_s": train_trained,
        "train_datums": len(datums),
    }
    for key, value in results.items():
        print(f"{key:42s} {value if not isinstance(value, float) else round(value, 2)}")
    if args.output:
        with open(args.output, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
