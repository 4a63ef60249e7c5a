"""Wall time per update: synchronous vs k = 1 pipelining vs asynchronous rollouts (staleness 1
and 2), on episodes with a long-tailed length; and staleness 0 == synchronous, token for token.

Two setups, each through the real `Trainer`, rollout engine and toy environment:

1. **A SIMULATION of a remote service** (labelled as such in the output; the cost model of
   `benchmarks/offpolicy.py`: sampling and training are separate resources, every call sleeps
   for a time computed from assumed per-token costs, replies come from a seeded text policy,
   no model runs). **Long tail:** the games whose task text hashes into the lowest
   `--slow-fraction` (20%) take `--slow-factor` (5x) as long per turn, as a 5x longer episode
   would. With 8 games per update, most synchronous updates wait for a slow one. Each mode
   runs `--updates` updates; its time per update is the median interval between consecutive
   finished updates after the first. `--repeats` repeats of all four modes, in turn; the
   speed-up of each repeat is sync over async; min and median are printed.
2. **The local backend** (tiny random Qwen3 on this CPU, rewards a hash of the reply so every
   update trains): the synchronous run and the asynchronous one at `--max-staleness 0`, same
   seed: their datums (tokens, logprobs, advantages, masks) and final weights must be equal
   (`same_tokens_staleness0`). Then sync vs async at staleness 1 on that backend: sampling and
   training share the cores and the engine lock, so little speed-up is expected.

The last line is

    sync_s_per_update=A pipelined=B async_s1=C async_s2=D speedup_async_s1=A/C
    same_tokens_staleness0=true ...

(simulation seconds per update, medians over repeats; speed-up: median of the per-repeat
ratios, its min alongside; then the local figures, and the share of the asynchronous runs'
groups that were dropped as too stale: the slow games, whose early turns are older than the
bound by the time they end).

    python benchmarks/async_rollouts.py [--updates 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from offpolicy import Clock, SimBackend, SimCosts, run_one

from agentrl.backends.base import SamplingParams
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.config import TrainConfig
from agentrl.core.types import Completion
from agentrl.reporting.sinks import Reportable
from agentrl.testing import RecordingBackend, same_datums

COSTS = SimCosts(decode_per_token=0.002, fb_per_token=0.00001)
"""The simulation's costs: a normal episode of 6 turns takes about 1 s, a slow one 5 s;
training an update about 0.5 s (printed at the start)."""
GAMES = 8
"""Games per update in the simulation."""
MODES = {
    "sync": {},
    "pipelined": {"max_steps_off_policy": 1},
    "async_s1": {"async_rollouts": True, "max_staleness": 1},
    "async_s2": {"async_rollouts": True, "max_staleness": 2},
}


class LongTailSampler:
    """A simulated sampler whose slow games (a keyed hash of the task text) answer
    `factor` times later."""

    def __init__(self, inner: Any, tokenizer: Any, fraction: float, factor: float) -> None:
        self.inner, self.tokenizer = inner, tokenizer
        self.fraction, self.factor = fraction, factor
        self.slow_requests = self.requests = 0

    def slow(self, prompt_tokens: Sequence[int]) -> bool:
        """Whether the prompt's game is a slow one (the first user message decides)."""
        text = self.tokenizer.decode(list(prompt_tokens))
        user = text.split("<|im_start|>user", 1)[-1].split("<|im_end|>", 1)[0]
        return zlib.crc32(user.encode()) % 1000 < self.fraction * 1000

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """The simulated reply, `factor` times as late for a slow game."""
        clock = time.perf_counter()
        out: list[Completion] = await self.inner.sample(prompt_tokens, num_samples, params)
        self.requests += 1
        if self.slow(prompt_tokens):
            self.slow_requests += 1
            await asyncio.sleep((self.factor - 1) * (time.perf_counter() - clock))
        return out


class LongTailBackend(SimBackend):
    """The simulated service with long-tailed episodes."""

    def __init__(self, tokenizer: Any, fraction: float, factor: float) -> None:
        super().__init__(tokenizer, COSTS, seed=0)
        self.long_tail = LongTailSampler(self._sampler, tokenizer, fraction, factor)

    async def sampler(self) -> Any:
        """Simulated save-weights-and-get-sampling-client."""
        await asyncio.sleep(self.costs.sampler_swap)
        return self.long_tail


class DropClock(Clock):
    """`Clock`, also counting the groups dropped as too stale and the ones carried over."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0.0
        self.carried: list[float] = []

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Timestamp one update; add up its dropped groups."""
        super().log(kind, step, record)
        sampling = getattr(record, "sampling", {})
        self.dropped += float(sampling.get("offpolicy/dropped_groups", 0.0))
        self.carried.append(float(sampling.get("async/carried", 0.0)))


def run_config(run_dir: Path, updates: int, **fields: Any) -> TrainConfig:
    """A toy run on the tiny model with `fields` on top (no checkpoints, no rollout file)."""
    values: dict[str, Any] = dict(
        base_model="tiny",
        backend="local",
        device="cpu",
        env="toy",
        max_steps=updates,
        save_every=10_000,
        save_rollouts=False,
        run_dir=run_dir,
    )
    return TrainConfig.model_validate(values | fields)


def sim_config(run_dir: Path, updates: int, mode: str) -> TrainConfig:
    """The simulated run of one mode: 8 games x 4 branches, up to 6 turns."""
    return run_config(
        run_dir,
        updates,
        games_per_batch=GAMES,
        group_size=4,
        max_episode_steps=6,
        max_assistant_tokens=64,
        max_trajectory_tokens=3000,
        **MODES[mode],
    )


def local_config(run_dir: Path, updates: int, **mode: Any) -> TrainConfig:
    """A small local run (tiny model, hash rewards)."""
    return run_config(
        run_dir,
        updates,
        games_per_batch=4,
        group_size=3,
        max_episode_steps=2,
        max_assistant_tokens=12,
        max_trajectory_tokens=1500,
        learning_rate=5e-3,
        lora_rank=4,
        **mode,
    )


async def run_sim(tmp: Path, tokenizer: Any, mode: str, args: argparse.Namespace) -> DropClock:
    """One simulated run of `mode`."""
    backend = LongTailBackend(tokenizer, args.slow_fraction, args.slow_factor)
    clock = DropClock()
    await run_one(backend, tokenizer, sim_config(tmp / mode, args.updates, mode), False, clock)
    share = backend.long_tail.slow_requests / max(backend.long_tail.requests, 1)
    median, low = clock.per_update()
    print(
        f"  sim {mode}: {median:.3f} s/update median, {low:.3f} min; staleness per update "
        f"{clock.staleness}; stale groups dropped {clock.dropped:g}; slow requests {share:.0%}",
        flush=True,
    )
    return clock


async def local_runs(tmp: Path, tokenizer: Any, updates: int) -> dict[str, Any]:
    """Sync vs async at staleness 0 (equal datums and weights) and sync vs async at 1."""
    from agentrl.backends.local import LocalBackend

    out: dict[str, Any] = {}
    runs: dict[str, tuple[RecordingBackend, Any, Clock]] = {}
    modes: dict[str, dict[str, Any]] = {
        "sync": {},
        "async_s0": {"async_rollouts": True, "max_staleness": 0},
        "async_s1": {"async_rollouts": True, "max_staleness": 1},
    }
    for name, mode in modes.items():
        config = local_config(tmp / f"local-{name}", updates, **mode)
        inner = LocalBackend.tiny(
            tokenizer, seed=config.seed, device="cpu", checkpoint_dir=tmp / f"ck-{name}"
        )
        backend = RecordingBackend(inner)
        clock = await run_one(backend, tokenizer, config, True)
        runs[name] = (backend, inner, clock)
        median, low = clock.per_update()
        print(f"  local {name}: {median:.3f} s/update median, {low:.3f} min", flush=True)
    sync, sync_inner, sync_clock = runs["sync"]
    zero, zero_inner, _ = runs["async_s0"]
    same = len(sync.datums) == len(zero.datums) == updates and all(
        same_datums(a, b) for a, b in zip(sync.datums, zero.datums, strict=True)
    )
    weights = all(
        torch.equal(p, q)
        for p, q in zip(
            sync_inner.trainable_parameters(), zero_inner.trainable_parameters(), strict=True
        )
    )
    out["same_tokens_staleness0"] = same and weights
    out["local_sync_s"] = sync_clock.per_update()[0]
    out["local_async_s1"] = runs["async_s1"][2].per_update()[0]
    return out


async def main() -> None:
    """All four modes on the simulation, `--repeats` times; then the local checks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=10, help="updates per simulated run")
    parser.add_argument("--local-updates", type=int, default=4, help="updates per local run")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the four sim modes")
    parser.add_argument("--slow-fraction", type=float, default=0.2)
    parser.add_argument("--slow-factor", type=float, default=5.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokenizer = build_qwen_tokenizer()
    print("SIMULATION of a remote service (assumed costs, not measured):")
    for name, value in asdict(COSTS).items():
        print(f"  {name} = {value} s")
    print(f"  {args.slow_fraction:.0%} of games {args.slow_factor:g}x slower per turn")
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    dropped: dict[str, list[float]] = {mode: [] for mode in MODES}
    speedups: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for repeat in range(args.repeats):
            print(f"repeat {repeat + 1}:", flush=True)
            for mode in MODES:
                clock = await run_sim(tmp / f"r{repeat}", tokenizer, mode, args)
                times[mode].append(clock.per_update()[0])
                trained = args.updates * GAMES
                dropped[mode].append(clock.dropped / (clock.dropped + trained))
            speedups.append(times["sync"][-1] / times["async_s1"][-1])
        print("LOCAL backend (tiny model on this CPU):", flush=True)
        local = await local_runs(tmp, tokenizer, args.local_updates)
    med = {mode: statistics.median(values) for mode, values in times.items()}
    print(
        f"  sim speed-up of async_s1 over sync: min {min(speedups):.2f}, median "
        f"{statistics.median(speedups):.2f} over {args.repeats} repeats "
        f"{[round(s, 2) for s in speedups]}"
    )
    print(
        f"sync_s_per_update={med['sync']:.3f} pipelined={med['pipelined']:.3f} "
        f"async_s1={med['async_s1']:.3f} async_s2={med['async_s2']:.3f} "
        f"speedup_async_s1={statistics.median(speedups):.2f} "
        f"speedup_async_s1_min={min(speedups):.2f} "
        f"same_tokens_staleness0={str(local['same_tokens_staleness0']).lower()} "
        f"local_sync_s_per_update={local['local_sync_s']:.3f} "
        f"local_async_s1={local['local_async_s1']:.3f} "
        f"dropped_share_s1={statistics.median(dropped['async_s1']):.3f} "
        f"dropped_share_s2={statistics.median(dropped['async_s2']):.3f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
