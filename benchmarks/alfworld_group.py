"""End to end through the EnvGroup: `engine="textworld"` vs `engine="fast"`, K branches each.

    python benchmarks/alfworld_group.py --data-root DIR --games N --steps S --seed K

For each of N games: a K-branch `AlfworldEnvGroup` per engine (worker process start, load and
reset of K branches, as a rollout sees it), then S group steps in which every live branch
gets a command (the same commands for both engines: random admissible actions, one in ten
invalid). Reports per engine the mean group reset and group step time and checks that both
engines returned identical `EnvStep`s. The last line is
`group_step_speedup=<x> group_reset_speedup=<y> identical=<true|false>`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from pathlib import Path

from tqdm import tqdm

from agentrl.core.types import EnvStep, TaskInfo
from agentrl.envs.alfworld.group import AlfworldEnvGroup, AlfworldEnvOptions

ENGINES = ("textworld", "fast")


async def play(
    task: TaskInfo, engine: str, size: int, steps: int, seed: int
) -> tuple[float, list[float], list[list[EnvStep]]]:
    """(reset seconds, step seconds, every step) of one group."""
    rng = random.Random(seed)
    group = AlfworldEnvGroup(task, size, AlfworldEnvOptions(engine=engine, max_steps=None))
    try:
        started = time.perf_counter()
        current = await group.reset()
        reset_seconds = time.perf_counter() - started
        history = [current]
        step_seconds = []
        for _ in range(steps):
            actions: list[str | None] = []
            for step in current:
                if step.finished:
                    actions.append(None)
                elif rng.random() < 0.1:
                    actions.append("jump around")
                else:
                    actions.append(rng.choice(step.admissible_actions))
            started = time.perf_counter()
            current = await group.step(actions)
            step_seconds.append(time.perf_counter() - started)
            history.append(current)
        return reset_seconds, step_seconds, history
    finally:
        await group.close()


async def run(args: argparse.Namespace) -> int:
    games = sorted(str(p) for p in args.data_root.rglob("game.tw-pddl"))
    if not games:
        raise SystemExit(f"no game.tw-pddl under {args.data_root}")
    rng = random.Random(args.seed)
    chosen = rng.sample(games, min(args.games, len(games)))
    resets: dict[str, list[float]] = {e: [] for e in ENGINES}
    steps: dict[str, list[float]] = {e: [] for e in ENGINES}
    identical = True
    for index, game in enumerate(tqdm(chosen, desc="games", unit="game")):
        task = TaskInfo(task_id=game, path=game)
        seed = rng.randrange(2**31)
        histories = {}
        order = ENGINES if index % 2 == 0 else ENGINES[::-1]
        for engine in order:
            reset_s, step_s, history = await play(task, engine, args.group_size, args.steps, seed)
            resets[engine].append(reset_s)
            steps[engine] += step_s
            histories[engine] = history
        identical &= histories["fast"] == histories["textworld"]
    print(f"\n{len(chosen)} games x {args.steps} group steps, K={args.group_size}")
    print(f"{'engine':<10} {'group reset s':>14} {'group step ms':>14}")
    for engine in ENGINES:
        reset_mean = statistics.fmean(resets[engine])
        step_mean = 1e3 * statistics.fmean(steps[engine])
        print(f"{engine:<10} {reset_mean:>14.3f} {step_mean:>14.2f}")
    step_speedup = statistics.fmean(steps["textworld"]) / statistics.fmean(steps["fast"])
    reset_speedup = sum(resets["textworld"]) / sum(resets["fast"])
    print(
        f"group_step_speedup={step_speedup:.1f} group_reset_speedup={reset_speedup:.1f} "
        f"identical={str(identical).lower()}"
    )
    return 0 if identical else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, required=True, help="folder of games")
    parser.add_argument("--games", type=int, default=5, help="games to play (N)")
    parser.add_argument("--steps", type=int, default=20, help="group steps per game (S)")
    parser.add_argument("--seed", type=int, default=0, help="game choice and actions (K)")
    parser.add_argument("--group-size", type=int, default=8, help="branches per group")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
