"""Stock TextWorld vs the fast ALFWorld engine, side by side in one process.

    python benchmarks/alfworld_env.py --data-root DIR --games N --steps S --seed K

For each of N games (any folder holding `game.tw-pddl` files, e.g. ALFWorld's `json_2.1.1`):
1. group load+reset: K stock environments loaded and reset (what K independent branches cost
   with TextWorld) vs one fast K-branch group loaded (cold: the game is not cached) and reset;
   the two engines alternate which goes first;
2. S steps in lockstep: one stock and one fast branch get the same commands (random admissible,
   one in ten invalid, optionally the planner's), each step timed separately and every output
   compared (observation, admissible commands, score, done, won, state key). Objects loaded
before the steps are frozen out of the garbage collector's reach (`gc.freeze`), so neither
engine's steps pay for collecting the other's heap.

Reports per engine the mean and p95 step latency, the group load+reset time, and the memory a
K-branch group adds (RSS growth while it is alive) and the process's peak RSS. The last line
is exactly `step_speedup=<x> reset_speedup=<y> identical=<true|false>`.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from agentrl.envs.alfworld.fast import FastAlfworldEngine, FastBranch, TextWorldBranch, lockstep


@dataclass
class EngineStats:
    """What one engine cost over the run."""

    steps: list[float] = field(default_factory=list)
    groups: list[float] = field(default_factory=list)
    group_rss: list[float] = field(default_factory=list)

    def row(self, name: str) -> str:
        steps = sorted(self.steps)
        p95 = steps[min(len(steps) - 1, int(0.95 * len(steps)))] if steps else float("nan")
        return (
            f"{name:<10} {1e3 * statistics.fmean(steps):>10.2f} {1e3 * p95:>10.2f} "
            f"{statistics.fmean(self.groups):>13.3f} {max(self.group_rss):>14.1f}"
        )


def rss_mib() -> float:
    """Current resident set size of this process in MiB (Linux), else the peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mib()


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def stock_group(game: str, size: int) -> tuple[float, float, list[TextWorldBranch]]:
    """Load and reset `size` stock environments: (seconds, RSS growth MiB, branches)."""
    gc.collect()
    before = rss_mib()
    started = time.perf_counter()
    branches = [TextWorldBranch(game) for _ in range(size)]
    loaded = time.perf_counter() - started
    for branch in branches:
        branch.reset()  # timed: the environment's reset, not the state key the wrapper adds
    seconds = loaded + sum(branch.last_reset_seconds for branch in branches)
    return seconds, rss_mib() - before, branches


def fast_group(
    engine: FastAlfworldEngine, game: str, size: int
) -> tuple[float, float, list[FastBranch]]:
    """Load (cold) and reset a fast group of `size` branches: (seconds, RSS growth, branches)."""
    engine.clear()  # drop cached games: measure a first load of this game
    gc.collect()
    before = rss_mib()
    started = time.perf_counter()
    branches = engine.branches(game, size)
    for branch in branches:
        branch.reset()
    return time.perf_counter() - started, rss_mib() - before, branches


def find_games(root: Path) -> list[str]:
    """Every `game.tw-pddl` under `root`, sorted."""
    games = sorted(str(p) for p in root.rglob("game.tw-pddl"))
    if not games:
        raise SystemExit(
            f"no game.tw-pddl under {root}: point --data-root at ALFWorld's json_2.1.1 folder "
            "(alfworld-download) or at games made by `agentrl generate`"
        )
    return games


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", type=Path, required=True, help="folder of games")
    parser.add_argument("--games", type=int, default=20, help="games to play (N)")
    parser.add_argument("--steps", type=int, default=30, help="lockstep commands per game (S)")
    parser.add_argument("--seed", type=int, default=0, help="game choice and actions (K)")
    parser.add_argument("--group-size", type=int, default=8, help="branches per group")
    parser.add_argument("--invalid", type=float, default=0.1, help="share of invalid commands")
    parser.add_argument("--planner", type=float, default=0.1, help="share of planner commands")
    args = parser.parse_args(argv)

    all_games = find_games(args.data_root)
    rng = random.Random(args.seed)
    games = rng.sample(all_games, min(args.games, len(all_games)))
    mix = lockstep.ActionMix(invalid=args.invalid, planner=args.planner)
    engine = FastAlfworldEngine()
    stock, fast = EngineStats(), EngineStats()
    mismatches: list[lockstep.Mismatch] = []
    for index, game in enumerate(tqdm(games, desc="games", unit="game")):
        order = ["stock", "fast"] if index % 2 == 0 else ["fast", "stock"]
        for which in order:
            if which == "stock":
                seconds, grown, stock_branches = stock_group(game, args.group_size)
                stock.groups.append(seconds)
                stock.group_rss.append(grown)
            else:
                seconds, grown, fast_branches = fast_group(engine, game, args.group_size)
                fast.groups.append(seconds)
                fast.group_rss.append(grown)
        # Both engines share this process: move what is loaded out of the collector's reach, so
        # neither engine's steps pay for collecting the other's (much larger) heap.
        gc.collect()
        gc.freeze()
        result = lockstep.play(
            stock_branches[0],
            fast_branches[0],
            steps=args.steps,
            seed=rng.randrange(2**31),
            mix=mix,
        )
        stock.steps += result.stock_step_seconds
        fast.steps += result.fast_step_seconds
        mismatches += result.mismatches
        gc.unfreeze()
        for branch in [*stock_branches, *fast_branches]:
            branch.close()
        del stock_branches, fast_branches

    step_speedup = statistics.fmean(stock.steps) / statistics.fmean(fast.steps)
    reset_speedup = sum(stock.groups) / sum(fast.groups)
    identical = not mismatches
    print(
        f"\n{len(games)} games x {args.steps} steps, group size {args.group_size}, seed {args.seed}"
    )
    print(f"{'engine':<10} {'step ms':>10} {'p95 ms':>10} {'group s':>13} {'group MiB':>14}")
    print(stock.row("textworld"))
    print(fast.row("fast"))
    print(f"process peak RSS: {peak_rss_mib():.0f} MiB (both engines, one process)")
    for mismatch in mismatches[:10]:
        print(f"MISMATCH {mismatch}")
    print(
        f"step_speedup={step_speedup:.1f} reset_speedup={reset_speedup:.1f} "
        f"identical={str(identical).lower()}"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
