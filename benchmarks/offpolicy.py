"""Wall time per update with off-policy pipelining (k = 0 vs 1 vs 2) and with streaming.

Two setups, each run through the real `Trainer`, rollout engine and toy environment:

1. **A simulation of a remote service** (labelled as such in the output). Sampling and
   training are separate resources, as on PyTRIO / Tinker; every call sleeps for a time
   computed from assumed per-token costs (printed; change them with the flags): a sample
   request costs `overhead + prefill * prompt tokens + decode * longest completion`, a
   forward_backward `overhead + per-token * tokens`, plus an optimizer step and a sampler
   swap (save weights, new sampling client) per update. Replies come from a seeded text policy,
   so no model runs. These are assumptions, not measurements of a service.
2. **The local backend**: the tiny random Qwen3 model samples and trains on this machine's
   CPU (rewards are a seeded hash of the reply so groups are not degenerate and every update
   trains). Sampling and training share the same cores and the engine lock, so little overlap
   is expected; the number says how much there is.

Streaming (`--stream-groups`, k = 0): each group is trained as soon as it is played, while the
rest of the update is still rolled out. Both setups run without and with it, alternating,
`--repeats` times; each repeat gives one ratio (time per update without / with), and the
min and median of those ratios are printed. The simulation runs it twice: with its 4 games
played at once (their groups end at about the same time: little to overlap) and in "waves"
(8 games per update, 4 at a time, as when env workers or sampling concurrency are fewer than
the games: the first wave trains while the second plays).

Per-update wall time is the median (and min) of the intervals between consecutive finished
updates after the first. The last line is
`sim_speedup_k1=X sim_speedup_k2=Y local_speedup_k1=Z sim_speedup_stream=W
sim_speedup_stream_waves=U local_speedup_stream=V` (k = 0's time per update over k's;
without streaming over with it, the median over repeats).

    python benchmarks/offpolicy.py [--updates 6] [--local-updates 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    SamplingParams,
)
from agentrl.backends.streaming import SummedStream
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.config import TrainConfig
from agentrl.core.types import Completion
from agentrl.envs.toy import toy_tool_protocol
from agentrl.envs.toy.policies import noisy_toy_policy
from agentrl.reporting.sinks import Reportable
from agentrl.testing import PolicySampler
from agentrl.testing.signal import HashReward
from agentrl.training import recipe
from agentrl.training.trainer import Trainer

PROTOCOL = toy_tool_protocol()
HEADING = "Available actions (copy one exactly):"


@dataclass(frozen=True)
class SimCosts:
    """Assumed service costs of the simulation (seconds): chosen so that sampling takes about
    1.5x as long as training per update, as in the 50-turn ALFWorld recipe, where sequential
    decoding of long episodes dominates."""

    sample_overhead: float = 0.040
    prefill_per_token: float = 0.00001
    decode_per_token: float = 0.012
    fb_overhead: float = 0.150
    fb_per_token: float = 0.0001
    optim_step: float = 0.080
    sampler_swap: float = 0.120


def toy_policy(seed: int) -> Callable[[str], str]:
    """Replies: a listed action (70%), an impossible one (20%) or no call (10%), drawn from a
    generator seeded by the prompt text and how often it was asked, so every setting plays the
    same replies whatever order its concurrent rollouts ask in."""
    return noisy_toy_policy(seed, prompt_seeded=True)


class SimSampler:
    """The policy's replies, delivered after the simulated sampling time."""

    def __init__(self, inner: PolicySampler, costs: SimCosts) -> None:
        self.inner, self.costs = inner, costs

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` replies, as late as a remote service would send them."""
        out = await self.inner.sample(prompt_tokens, num_samples, params)
        c = self.costs
        longest = max(len(x.tokens) for x in out)
        await asyncio.sleep(
            c.sample_overhead
            + c.prefill_per_token * len(prompt_tokens)
            + c.decode_per_token * longest
        )
        return out


class SimBackend:
    """A `TrainingBackend` whose calls take the simulated service time (no model)."""

    def __init__(self, tokenizer: Any, costs: SimCosts, seed: int) -> None:
        self.costs = costs
        self._sampler = SimSampler(PolicySampler(tokenizer, toy_policy(seed)), costs)

    async def sampler(self) -> SimSampler:
        """Simulated save-weights-and-get-sampling-client."""
        await asyncio.sleep(self.costs.sampler_swap)
        return self._sampler

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Simulated forward/backward over every target token."""
        tokens = sum(len(d) for d in datums)
        await asyncio.sleep(self.costs.fb_overhead + self.costs.fb_per_token * tokens)
        return ForwardBackwardResult(loss=0.0, num_tokens=int(sum(d.mask.sum() for d in datums)))

    def open_stream(self, loss: LossName, config: LossConfig) -> SummedStream:
        """Streaming as on tinker: every call is a sum, the calls add up."""
        return SummedStream(self, loss, config)

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """Simulated optimizer step."""
        await asyncio.sleep(self.costs.optim_step)
        return {}

    async def save(self, name: str) -> CheckpointRef:
        """Nothing is stored."""
        return CheckpointRef(name=name, state_path=f"sim://{name}", sampler_path=f"sim://{name}")

    async def load(self, ref: CheckpointRef) -> None:
        """Nothing to load."""


class Clock:
    """A metric sink that timestamps every finished update."""

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self.staleness: list[float] = []
        self.waits: list[float] = []
        self.trains: list[float] = []
        self.longest_group: list[float] = []
        self.overlap: list[float] = []
        self.median_group: list[float] = []

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Timestamp one update."""
        self.stamps.append(time.perf_counter())
        sampling = getattr(record, "sampling", {})
        self.staleness.append(float(sampling.get("offpolicy/staleness", 0.0)))
        timings = getattr(record, "timings", {})
        self.waits.append(float(timings.get("rollout", 0.0)))
        self.trains.append(
            float(timings.get("forward_backward", 0.0) + timings.get("optim_step", 0.0))
        )
        self.longest_group.append(float(sampling.get("stragglers/group_seconds_max", 0.0)))
        self.overlap.append(float(timings.get("stream_overlap", 0.0)))
        self.median_group.append(float(sampling.get("stragglers/group_seconds_p50", 0.0)))

    def phases(self) -> str:
        """Median seconds per update waiting for groups, training, and of the slowest group."""
        med = statistics.median
        return (
            f"waiting for groups {med(self.waits[1:]):.3f} s, training {med(self.trains[1:]):.3f}"
            f" s, groups done at p50 {med(self.median_group[1:]):.3f} s / max"
            f" {med(self.longest_group[1:]):.3f} s, training overlapped with"
            f" rollouts {med(self.overlap[1:]):.3f} s (medians after update 1)"
        )

    def close(self) -> None:
        """Nothing to close."""

    def per_update(self) -> tuple[float, float]:
        """(median, min) seconds between consecutive updates after the first."""
        gaps = [b - a for a, b in zip(self.stamps, self.stamps[1:], strict=False)]
        return statistics.median(gaps), min(gaps)


def config_for(
    run_dir: Path, k: int, updates: int, local: bool, stream: bool = False, waves: bool = False
) -> TrainConfig:
    """The toy run of one setting; `waves`: 8 games per update, 4 played at a time."""
    return TrainConfig(
        base_model="tiny",
        backend="local",
        device="cpu",
        env="toy",
        max_steps=updates,
        games_per_batch=8 if waves else 2 if local else 4,
        max_concurrent_games=4 if waves else None,
        group_size=4,
        max_episode_steps=3 if local else 6,
        max_assistant_tokens=16 if local else 64,
        max_trajectory_tokens=1500 if local else 3000,
        learning_rate=1e-4,
        lora_rank=4,
        save_every=10_000,
        save_rollouts=False,
        run_dir=run_dir,
        max_steps_off_policy=k,
        stream_groups=stream,
    )


async def run_one(
    backend: Any, tokenizer: Any, config: TrainConfig, local: bool, clock: Clock | None = None
) -> Clock:
    """One training run; returns its update timestamps (`clock`, default a new `Clock`)."""
    clock = Clock() if clock is None else clock
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=recipe.env_factory_for(config),
        tasks=recipe.tasks_for(config, ["train"]),
        renderer=recipe.renderer_for(tokenizer, PROTOCOL),
        protocol=PROTOCOL,
        reward_fn=HashReward() if local else None,
        sinks=clock,
        progress=False,
    )
    await trainer.run()
    return clock


def local_backend(tokenizer: Any, folder: Path) -> Any:
    """A fresh tiny local backend (same seed every time)."""
    from agentrl.backends.local import LocalBackend

    return LocalBackend.tiny(tokenizer, seed=0, device="cpu", checkpoint_dir=folder)


async def stream_ratios(
    tmp: Path,
    tokenizer: Any,
    costs: SimCosts,
    local: bool,
    updates: int,
    repeats: int,
    waves: bool = False,
) -> list[float]:
    """Per repeat: seconds per update without streaming over with it (k = 0, same settings)."""
    ratios = []
    name = ("local" if local else "sim") + (" waves" if waves else "")
    for repeat in range(repeats):
        times = {}
        for stream in (False, True):
            folder = tmp / f"{name.replace(' ', '-')}-stream{int(stream)}-{repeat}"
            config = config_for(folder, 0, updates, local=local, stream=stream, waves=waves)
            backend = (
                local_backend(tokenizer, folder / "ck")
                if local
                else SimBackend(tokenizer, costs, seed=0)
            )
            clock = await run_one(backend, tokenizer, config, local)
            times[stream] = clock.per_update()
            print(
                f"  {name} k=0 stream={'on' if stream else 'off'} (repeat {repeat + 1}): "
                f"{times[stream][0]:.3f} s/update median, {times[stream][1]:.3f} min; "
                f"{clock.phases()}",
                flush=True,
            )
        ratios.append(times[False][0] / times[True][0])
    print(
        f"  {name} streaming speed-up: min {min(ratios):.2f}, median "
        f"{statistics.median(ratios):.2f} over {repeats} repeats {[round(r, 2) for r in ratios]}",
        flush=True,
    )
    return ratios


async def main() -> None:
    """Run k = 0, 1, 2 on the simulation and k = 0, 1 on the local backend, then streaming off
    and on (k = 0) on both; print ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=6, help="updates per simulated run")
    parser.add_argument("--local-updates", type=int, default=5, help="updates per local run")
    parser.add_argument("--repeats", type=int, default=3, help="streaming off/on pairs per setup")
    for name, value in asdict(SimCosts()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=value)
    args = parser.parse_args()
    costs = SimCosts(**{name: getattr(args, name) for name in asdict(SimCosts())})
    tokenizer = build_qwen_tokenizer()
    print("SIMULATION of a remote service (assumed costs, not measured):")
    for name, value in asdict(costs).items():
        print(f"  {name} = {value} s")
    sim: dict[int, tuple[float, float]] = {}
    local: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in (0, 1, 2):
            config = config_for(Path(tmp) / f"sim{k}", k, args.updates, local=False)
            clock = await run_one(SimBackend(tokenizer, costs, seed=0), tokenizer, config, False)
            sim[k] = clock.per_update()
            print(
                f"  sim k={k}: {sim[k][0]:.3f} s/update median, {sim[k][1]:.3f} min; "
                f"{clock.phases()}; staleness per update {clock.staleness}",
                flush=True,
            )
        for k in (0, 1):
            config = config_for(Path(tmp) / f"local{k}", k, args.local_updates, local=True)
            backend = local_backend(tokenizer, Path(tmp) / f"ck{k}")
            clock = await run_one(backend, tokenizer, config, True)
            local[k] = clock.per_update()
            print(
                f"  local k={k}: {local[k][0]:.3f} s/update median, {local[k][1]:.3f} min; "
                f"{clock.phases()}; staleness per update {clock.staleness}",
                flush=True,
            )
        sim_stream = await stream_ratios(
            Path(tmp), tokenizer, costs, False, args.updates, args.repeats
        )
        sim_waves = await stream_ratios(
            Path(tmp), tokenizer, costs, False, args.updates, args.repeats, waves=True
        )
        local_stream = await stream_ratios(
            Path(tmp), tokenizer, costs, True, args.local_updates, args.repeats
        )
    print(
        f"sim_speedup_k1={sim[0][0] / sim[1][0]:.2f} sim_speedup_k2={sim[0][0] / sim[2][0]:.2f} "
        f"local_speedup_k1={local[0][0] / local[1][0]:.2f} "
        f"sim_speedup_stream={statistics.median(sim_stream):.2f} "
        f"sim_speedup_stream_waves={statistics.median(sim_waves):.2f} "
        f"local_speedup_stream={statistics.median(local_stream):.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
