"""Env throughput of the executors: in process, one Ray actor, two Ray actors on two nodes.

    python benchmarks/scale_out.py [--groups 16] [--group-size 2] [--steps 6] [--burn-ms 20]
                                   [--repeats 3] [--latency-steps 300]

One run starts a Ray cluster on loopback (a head node and a second node, one CPU each) and
plays the same batch of a CPU-bound synthetic env (`agentrl.testing.busy`: each step of a
branch burns `--burn-ms` of CPU in a busy loop, as a code sandbox or simulator would) through
the real rollout engine with an instant scripted player, under three executors, interleaved
per repeat so that load on the machine hits all three alike:

- `inprocess`: the groups step on the trainer's event loop (one core at most);
- `ray1`: one Ray actor (`--env-groups-in-flight 1`);
- `ray2`: two Ray actors, one per node (SPREAD scheduling).

Each executor's actors are started (and its env built) by a warm-up batch before the timed one,
as across the updates of a training run; the two Ray arms take turns (they cannot both hold the
cluster's two CPUs). Throughput is episodes per second of wall time; the
reported figure is the median over repeats (the table also shows the min). Ray's added latency
per step is measured on its own: `--latency-steps` sequential steps of one branch that burn
nothing, through a Ray actor and in process; the difference of the medians is what Ray adds.

The last line is
`inprocess_eps=A ray1_eps=B ray2_eps=C scaling=C/B overhead_ms_per_step=D`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory, close_env_factory
from agentrl.core.types import Completion, CompletionStop, TaskInfo
from agentrl.executors import ExecutorKind, ExecutorOptions, GroupSource, executor_factory
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.testing.busy import BusySource, busy_protocol, busy_reply, busy_tasks


class InstantPlayer:
    """A `Sampler` that always answers the `work` call at once (tokens encoded once)."""

    def __init__(self, renderer: ChatRenderer) -> None:
        reply = renderer.tokenizer.encode(busy_reply(""), add_special_tokens=False)
        self.tokens = (*reply, renderer.stop_tokens[0])

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` copies of the `work` call."""
        logprobs = (-0.1,) * len(self.tokens)
        return [Completion(self.tokens, logprobs, CompletionStop.STOP) for _ in range(num_samples)]


def options(kind: str, groups: int | None, address: str) -> ExecutorOptions:
    """The executor of one benchmark arm."""
    if kind == "inprocess":
        return ExecutorOptions()
    return ExecutorOptions(kind=ExecutorKind.RAY, max_groups=groups, ray_address=address)


async def play(
    factory: EnvGroupFactory, tasks: list[TaskInfo], renderer: ChatRenderer, args: Any
) -> float:
    """Seconds to play every task (one group each), all groups in flight at once."""
    config = RolloutConfig(
        group_size=args.group_size, max_env_steps=args.steps + 1, max_assistant_tokens=32
    )
    started = time.perf_counter()
    groups = await rollout_batch(
        tasks,
        env_factory=factory,
        sampler=InstantPlayer(renderer),
        renderer=renderer,
        protocol=busy_protocol(),
        config=config,
        max_concurrent_groups=len(tasks),
    )
    elapsed = time.perf_counter() - started
    lost = [t.error for g in groups for t in g.trajectories if not t.won]
    if lost:
        raise RuntimeError(f"{len(lost)} episodes were not won: {lost[0]}")
    return elapsed


async def step_latency(source: GroupSource, executor: ExecutorOptions, steps: int) -> float:
    """Median seconds of one sequential step of one branch (the env burns nothing)."""
    factory = executor_factory(source, executor)
    try:
        group = factory(TaskInfo("latency"), 1)
        await group.reset()
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            await group.step(["rest"])  # `rest` never wins: the branch stays live
            times.append(time.perf_counter() - started)
        await group.close()
    finally:
        await close_env_factory(factory)
    return statistics.median(times)


async def measure(args: Any, address: str, renderer: ChatRenderer) -> dict[str, list[float]]:
    """Episodes per second of each arm, per repeat (each arm's executor is built, warmed up,
    timed and closed in turn: the two Ray arms cannot hold the cluster's CPUs at once)."""
    source = BusySource(burn_ms=args.burn_ms, steps=args.steps)
    arms = {"inprocess": None, "ray1": 1, "ray2": 2}
    tasks = busy_tasks(args.groups)
    episodes = args.groups * args.group_size
    rates: dict[str, list[float]] = {name: [] for name in arms}
    for repeat in range(args.repeats):
        for name, groups in arms.items():
            factory = executor_factory(source, options(name, groups, address))
            try:  # warm-up: the actors started, the env built
                await play(factory, busy_tasks(groups or 1), renderer, args)
                seconds = await play(factory, tasks, renderer, args)
            finally:
                await close_env_factory(factory)
            rates[name].append(episodes / seconds)
            print(f"repeat {repeat + 1} {name}: {episodes / seconds:.2f} episodes/s")
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="steps to win an episode")
    parser.add_argument("--burn-ms", type=float, default=20.0, help="CPU per branch step")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-steps", type=int, default=300)
    args = parser.parse_args(argv)

    import ray
    from ray.cluster_utils import Cluster

    from agentrl.tokenizer import build_qwen_tokenizer

    renderer = ChatRenderer(build_qwen_tokenizer())
    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="WARNING", configure_logging=False)
    print(f"Ray cluster of 2 nodes x 1 CPU up in {time.perf_counter() - started:.1f}s")
    try:
        rates = asyncio.run(measure(args, cluster.address, renderer))
        idle = BusySource(burn_ms=0.0, steps=10**9)
        ray_step = asyncio.run(
            step_latency(idle, options("ray1", 1, cluster.address), args.latency_steps)
        )
        local_step = asyncio.run(
            step_latency(idle, options("inprocess", None, ""), args.latency_steps)
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"\n{'executor':<10} {'eps median':>11} {'eps min':>8}")
    for name, values in rates.items():
        print(f"{name:<10} {median[name]:>11.2f} {min(values):>8.2f}")
    overhead_ms = (ray_step - local_step) * 1000
    print(
        f"step latency p50: ray {ray_step * 1000:.3f} ms, in process {local_step * 1000:.3f} ms"
        f" ({args.latency_steps} steps)"
    )
    print(
        f"inprocess_eps={median['inprocess']:.2f} ray1_eps={median['ray1']:.2f} "
        f"ray2_eps={median['ray2']:.2f} scaling={median['ray2'] / median['ray1']:.2f} "
        f"overhead_ms_per_step={overhead_ms:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
