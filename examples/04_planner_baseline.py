"""Evaluate the ALFWorld planner baseline on freshly generated games (no model involved).

Generates a few verified games offline, plays each validation game with the planner through
the rollout engine (its plan sent as tool calls) and writes the usual eval JSONL file with a
summary per split. The planner should win every generated game.

Run: python examples/04_planner_baseline.py
"""
# agentrl-example: slow

import asyncio
import os
from pathlib import Path

from agentrl import EvalConfig, evaluate
from agentrl.envs.alfworld import generate_games

out = Path(os.environ.get("AGENTRL_EXAMPLE_OUT", "runs/examples")) / "04_planner_baseline"
games = generate_games(out / "games", valid_seen=2, valid_unseen=2, seed=1, progress=False)
print(f"generated {len(games.games)} games under {games.root}")
config = EvalConfig(
    output=out / "planner.jsonl",
    policy="planner",
    data_root=games.root,
    split="all",
    overwrite_output=True,
)
outcome = asyncio.run(evaluate(config, progress=False))
for summary in outcome.summaries:
    print(f"{summary.split}: {summary.stats.wins}/{summary.stats.episodes} won")
print("episodes and summaries in", outcome.path)
