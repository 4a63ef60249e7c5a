"""Tokens per ALFWorld trajectory with and without the admissible-action list.

Plays generated (or given) ALFWorld games with the planner baseline through the real rollout
engine: the planner's plan is written as `alfworld_step` tool calls by a `PolicySampler`, the
prompts are rendered with the real Qwen tokenizer (built from dashscope's vocabulary), and
each game is played twice, once with the admissible actions listed in the first user message
and every tool message (the published recipe) and once without. Both runs take the same
actions, so the difference is the cost of the list. Reported side by side, as ratios:

- tokens per trajectory (final sequence length: what a datum trains on),
- prefill per trajectory (sum of prompt lengths over turns: what a sampler without prefix
  cache re-reads, the dominant billed quantity of the published run),
- trajectories that would not fit the 12,000-token budget.

Planner episodes are short (about 6 steps); `--detour N` prepends N idle `look` / `inventory`
steps to mimic the 21-23 env steps of LLM episodes in the published evaluation.

    PYTHONPATH=src python benchmarks/rollout.py                     # 12 generated games
    PYTHONPATH=src python benchmarks/rollout.py --detour 16                 # ~22-step episodes
    PYTHONPATH=src python benchmarks/rollout.py --games ~/alfworld --split valid_seen --limit 20

`--speed` measures the rollout engine itself instead (`benchmarks/rollout_engine.py`): today's
shipped engine and the new one (persistent worker pool, cheap prefix checks, line-cached
encoding) play the same games at the recipe's scale (8 games x 8 branches, 50 steps, 12K
tokens) in the same run, `--repeats` times (min / median), for `--updates` updates each: turns/s
of the first update (cold) and of the later ones (steady) with an instant scripted sampler, the
main process's CPU per turn (the sampler's own CPU left out), the non-sampler share of wall time
with a sampler of 20 ms + 2 ms per token, and, in a fresh process, the peak RSS of one batch
above the process baseline. The last line is
`steady_speedup=S main_cpu_ms_per_turn=C non_sampler_share=F identical=true|false`.

    PYTHONPATH=src python benchmarks/rollout.py --speed --games /work/shared/alfworld
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer, load_tokenizer
from agentrl.core.types import TaskInfo, Trajectory
from agentrl.envs.alfworld import (
    PlannerPolicy,
    find_games,
    generate_games,
    make_alfworld_group,
)
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import PolicySampler

BUDGET = 12_000


@dataclass(frozen=True)
class Row:
    """One trajectory's numbers."""

    task_id: str
    task_type: str
    admissible_list: bool
    won: bool
    turns: int
    total_tokens: int
    completion_tokens: int
    prefill_tokens: int


def plan_policy(plan: tuple[str, ...], call: Callable[[str], str]) -> Callable[[str], str]:
    """Reply with the plan's next command; the turn number is the count of tool results."""

    def policy(prompt: str) -> str:
        turn = prompt.count("<tool_response>")
        return call(plan[turn] if turn < len(plan) else "look")

    return policy


async def play(
    task: TaskInfo, tokenizer: object, admissible: bool, group_size: int, detour: int
) -> list[Row]:
    """Play `task` with the planner's plan after `detour` look/inventory steps; one Row per
    branch."""
    protocol = alfworld_tool_protocol(include_admissible=admissible)
    renderer = ChatRenderer(tokenizer, protocol.tools)  # type: ignore[arg-type]
    planner = PlannerPolicy()
    await planner.start(task, 1)
    idle = tuple("look" if i % 2 == 0 else "inventory" for i in range(detour))
    policy = plan_policy(idle + planner.plan, protocol.call_text)
    sampler = PolicySampler(tokenizer, policy)  # type: ignore[arg-type]
    config = RolloutConfig(group_size=group_size, max_trajectory_tokens=10**7, max_env_steps=200)
    group = await rollout_group(
        task,
        env_factory=make_alfworld_group,
        sampler=sampler,
        renderer=renderer,
        protocol=protocol,
        config=config,
    )
    return [row(t, admissible) for t in group.trajectories]


def row(trajectory: Trajectory, admissible: bool) -> Row:
    """The numbers of one trajectory."""
    return Row(
        task_id=trajectory.task.task_id,
        task_type=trajectory.task.task_type,
        admissible_list=admissible,
        won=trajectory.won,
        turns=len(trajectory.turns),
        total_tokens=trajectory.tokens.total,
        completion_tokens=trajectory.tokens.completion,
        prefill_tokens=sum(len(t.prompt_tokens) for t in trajectory.turns),
    )


def summary(rows: list[Row]) -> dict[str, float]:
    """Means over trajectories."""
    return {
        "trajectories": len(rows),
        "win_rate": statistics.fmean(r.won for r in rows),
        "turns": statistics.fmean(r.turns for r in rows),
        "tokens_per_trajectory": statistics.fmean(r.total_tokens for r in rows),
        "tokens_per_trajectory_max": max(r.total_tokens for r in rows),
        "tokens_per_turn": statistics.fmean(r.total_tokens / max(1, r.turns) for r in rows),
        "completion_per_trajectory": statistics.fmean(r.completion_tokens for r in rows),
        "prefill_per_trajectory": statistics.fmean(r.prefill_tokens for r in rows),
        "over_12k_budget": sum(r.total_tokens > BUDGET for r in rows),
    }


def _speed_tasks(args: argparse.Namespace, scratch: str, count: int) -> list[TaskInfo]:
    if args.games is None:
        report = generate_games(scratch, train=count, seed=args.seed, progress=True)
        return [g.to_task() for g in report.games]
    return [g.to_task() for g in find_games(args.games, splits=[args.split])[:count]]


def _spread(values: list[float]) -> str:
    return f"{min(values):.3g} / {statistics.median(values):.3g}"


def speed(args: argparse.Namespace, tokenizer: object) -> None:
    """`--speed`: the shipped and the new engine side by side (see the module docstring)."""
    import rollout_engine as bench

    games = 8
    with tempfile.TemporaryDirectory(prefix="agentrl-bench-") as scratch:
        tasks = _speed_tasks(args, scratch, games * args.updates)
        batches = [tasks[i : i + games] for i in range(0, len(tasks), games)]
        load = os.getloadavg()
        result = asyncio.run(
            bench.compare(
                tokenizer, batches, repeats=args.repeats, latency=(0.020, 0.002), engine="fast"
            )
        )
        probe = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-probe",
                *(["--games", str(args.games)] if args.games else []),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ},
        )
    memory = json.loads(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else {}
    if probe.returncode != 0:
        print(probe.stderr[-2000:], file=sys.stderr)
    rows = result["rows"]
    print(
        f"\n{games} games x 8 branches, recipe budgets, {args.updates} updates x "
        f"{args.repeats} repeats (min / median); load before {load[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(f"{'metric':<24}{'shipped':>20}{'new':>20}")
    for key in rows["new"][0]:
        shipped = [r[key] for r in rows["shipped"]]
        new = [r[key] for r in rows["new"]]
        print(f"{key:<24}{_spread(shipped):>20}  {_spread(new):>20}")
    ratio = [
        n["steady_turns_per_s"] / s["steady_turns_per_s"]
        for s, n in zip(rows["shipped"], rows["new"], strict=True)
    ]
    cold = [
        n["cold_turns_per_s"] / s["cold_turns_per_s"]
        for s, n in zip(rows["shipped"], rows["new"], strict=True)
    ]
    print(f"steady speedup (per repeat): {_spread(ratio)}; cold speedup: {_spread(cold)}")
    for key, value in memory.items():
        print(f"memory {key}: {value:.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = args.out.with_name("rollout_speed.json")
    out.write_text(
        json.dumps(
            {"rows": rows, "identical": result["identical"], "memory": memory, "load": load},
            indent=2,
        )
    )
    cpu = statistics.median(r["main_cpu_ms_per_turn"] for r in rows["new"])
    share = statistics.median(r["non_sampler_share"] for r in rows["new"])
    print(
        f"steady_speedup={statistics.median(ratio):.2f} main_cpu_ms_per_turn={cpu:.2f} "
        f"non_sampler_share={share:.2f} identical={str(result['identical']).lower()}"
    )


def memory(args: argparse.Namespace, tokenizer: object) -> None:
    """`--memory-probe` (run by `--speed` in a fresh process): one JSON line."""
    import rollout_engine as bench

    with tempfile.TemporaryDirectory(prefix="agentrl-bench-") as scratch:
        tasks = _speed_tasks(args, scratch, 8)
        print(json.dumps(bench.memory_probe(tokenizer, tasks, "fast")))


def main() -> None:
    """Parse arguments, play the games both ways, print and save the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=Path, help="data root (default: generate games)")
    parser.add_argument("--split", default="train", help="split of --games to use")
    parser.add_argument("--limit", type=int, default=12, help="games to play (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="generation seed")
    parser.add_argument("--group-size", type=int, default=1, help="branches per game")
    parser.add_argument(
        "--detour",
        type=int,
        default=0,
        help="idle look/inventory steps before the plan, to mimic longer LLM episodes",
    )
    parser.add_argument("--tokenizer", help="a local tokenizer path instead of built-in Qwen")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/rollout.json"))
    parser.add_argument("--speed", action="store_true", help="measure the engine (see above)")
    parser.add_argument("--updates", type=int, default=3, help="--speed: updates per engine")
    parser.add_argument("--repeats", type=int, default=3, help="--speed: repeats")
    parser.add_argument("--memory-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else build_qwen_tokenizer()
    if args.speed or args.memory_probe:
        (speed if args.speed else memory)(args, tokenizer)
        return
    with tempfile.TemporaryDirectory(prefix="agentrl-bench-") as scratch:
        if args.games is None:
            report = generate_games(scratch, train=args.limit, seed=args.seed, progress=True)
            examples = list(report.games)
        else:
            examples = find_games(args.games, splits=[args.split])[: args.limit]
        tasks = [g.to_task() for g in examples]
        rows: list[Row] = []
        started = time.perf_counter()
        for task in tqdm(tasks, desc="games", unit="game"):
            for admissible in (True, False):
                rows += asyncio.run(play(task, tokenizer, admissible, args.group_size, args.detour))
        seconds = time.perf_counter() - started

    with_list = summary([r for r in rows if r.admissible_list])
    without = summary([r for r in rows if not r.admissible_list])
    keys = [k for k in with_list if k not in ("trajectories",)]
    print(
        f"\n{len(tasks)} games x {args.group_size} branch(es), planner-played "
        f"(+{args.detour} idle steps), {seconds:.0f}s"
    )
    print(f"{'metric':<28}{'with list':>12}{'without':>12}{'ratio':>8}")
    for key in keys:
        a, b = with_list[key], without[key]
        ratio = f"{a / b:.2f}" if b else "-"
        print(f"{key:<28}{a:>12.1f}{b:>12.1f}{ratio:>8}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "games": len(tasks),
                "group_size": args.group_size,
                "detour": args.detour,
                "with_admissible_list": with_list,
                "without_admissible_list": without,
                "rows": [asdict(r) for r in rows],
            },
            indent=2,
        )
    )
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
