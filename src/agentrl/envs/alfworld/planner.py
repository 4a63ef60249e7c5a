"""Planner baseline: a non-LLM policy that plays a full-knowledge plan of each game.

`PlannerPolicy` is used where an LLM policy would be: `await policy.start(task, K)` once
per game, then `policy.next_action(branch, env_step)` each turn. Its plan comes from, in
order (`source="auto"`): the game's stored `walkthrough` (generated games carry the plan
they were verified with), the full-knowledge expert (`expert.py`, milliseconds), or Fast
Downward's optimal planner through TextWorld (`source="fast_downward"`, seconds to minutes
per large room, run in a worker process with a time bound). On generated and official
games it should win about 100% of episodes; anything less points at a broken environment.
`play_group` plays one EnvGroup with it; `play_tasks` plays many games concurrently.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentrl.core.env import EnvGroup, EnvGroupFactory
from agentrl.core.types import EnvStep, TaskInfo
from agentrl.envs.alfworld.expert import plan_for_game

__all__ = [
    "BranchResult",
    "GameResult",
    "PlanSource",
    "PlannerPolicy",
    "fast_downward_plan",
    "play_group",
    "play_tasks",
]

PlanSource = Literal["auto", "walkthrough", "expert", "fast_downward"]


@dataclass(frozen=True)
class BranchResult:
    """How one branch went."""

    branch: int
    won: bool
    steps: int
    actions: tuple[str, ...]
    error: str | None = None


@dataclass(frozen=True)
class GameResult:
    """How the planner did on one game."""

    task: TaskInfo
    branches: tuple[BranchResult, ...]
    plan_source: str

    @property
    def success_rate(self) -> float:
        """Fraction of branches that won."""
        return sum(b.won for b in self.branches) / max(1, len(self.branches))


def fast_downward_plan(game_file: str) -> list[str]:
    """Fast Downward's plan from the initial state via TextWorld (run it in a worker)."""
    from agentrl._optional import require
    from agentrl.envs.alfworld.compat import apply_textworld_compat

    textworld = require("textworld", "alfworld", "the planner baseline")
    tw_env = require("alfworld.agents.environment.alfred_tw_env", "alfworld", "the planner")
    apply_textworld_compat()
    infos = textworld.EnvInfos(admissible_commands=True, policy_commands=True)
    wrappers = [tw_env.AlfredDemangler(shuffle=False), tw_env.AlfredInfos]
    env = textworld.start(game_file, infos, wrappers=wrappers)
    try:
        return list(env.reset()["policy_commands"])
    finally:
        env.close()


class PlannerPolicy:
    """Plays a precomputed winning plan on every branch of a game."""

    def __init__(self, source: PlanSource = "auto", plan_timeout: float = 300.0) -> None:
        self.source = source
        self.plan_timeout = plan_timeout
        self.plan: tuple[str, ...] = ()
        self.plan_source = ""
        self._cursor: list[int] = []

    async def _plan(self, game_file: str) -> tuple[tuple[str, ...], str]:
        if self.source in ("auto", "walkthrough"):
            raw = json.loads(Path(game_file).read_text(encoding="utf-8")).get("walkthrough")
            if raw:
                return tuple(str(c) for c in raw), "walkthrough"
            if self.source == "walkthrough":
                raise ValueError(f"{game_file} has no walkthrough")
        if self.source in ("auto", "expert"):
            plan = await asyncio.to_thread(plan_for_game, game_file)
            if plan is not None:
                return tuple(plan), "expert"
            if self.source == "expert":
                raise ValueError(f"the expert found no plan for {game_file}")
        from agentrl.envs.alfworld.workers import CallWorker

        worker = CallWorker()
        try:
            target = "agentrl.envs.alfworld.planner:fast_downward_plan"
            plan = await worker.call(target, (game_file,), self.plan_timeout)
        finally:
            await worker.close()
        return tuple(plan), "fast_downward"

    async def start(self, task: TaskInfo, group_size: int) -> None:
        """Compute the plan of `task` and rewind every branch to its first command."""
        if task.path is None:
            raise ValueError(f"task {task.task_id!r} has no game file path")
        self.plan, self.plan_source = await self._plan(task.path)
        self._cursor = [0] * group_size

    def next_action(self, branch: int, step: EnvStep) -> str | None:
        """The branch's next plan command; None when it is finished or the plan is done."""
        if step.finished or self._cursor[branch] >= len(self.plan):
            return None
        action = self.plan[self._cursor[branch]]
        self._cursor[branch] += 1
        return action


async def play_group(
    group: EnvGroup, policy: PlannerPolicy, max_steps: int | None = None
) -> list[BranchResult]:
    """Reset `group` and play every branch with `policy` until all branches stop.

    The caller still owns the group (close it yourself).
    """
    steps = await group.reset()
    await policy.start(group.task, group.size)
    taken: list[list[str]] = [[] for _ in range(group.size)]
    while True:
        actions: list[str | None] = []
        for i, step in enumerate(steps):
            limit_hit = max_steps is not None and len(taken[i]) >= max_steps
            action = None if limit_hit else policy.next_action(i, step)
            actions.append(action)
            if action is not None:
                taken[i].append(action)
        if all(a is None for a in actions):
            break
        steps = await group.step(actions)
    return [
        BranchResult(i, step.won, len(taken[i]), tuple(taken[i]), step.error)
        for i, step in enumerate(steps)
    ]


async def play_tasks(
    tasks: Sequence[TaskInfo],
    factory: EnvGroupFactory,
    *,
    group_size: int = 1,
    concurrency: int = 2,
    source: PlanSource = "auto",
    max_steps: int | None = None,
) -> list[GameResult]:
    """Play each task with a fresh `PlannerPolicy`, `concurrency` games at a time."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task: TaskInfo) -> GameResult:
        async with gate:
            group = factory(task, group_size)
            policy = PlannerPolicy(source)
            try:
                branches = await play_group(group, policy, max_steps)
            finally:
                await group.close()
            return GameResult(task, tuple(branches), policy.plan_source)

    return list(await asyncio.gather(*(one(t) for t in tasks)))
