"""Planner baseline: wins generated (and official) games; the expert names things as the game."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("textworld")

from agentrl.envs.alfworld.data import TASK_TYPES, find_games
from agentrl.envs.alfworld.engine import TextWorldEngine
from agentrl.envs.alfworld.expert import (
    ExpertTask,
    expert_plan,
    parse_world,
)
from agentrl.envs.alfworld.group import make_alfworld_group
from agentrl.envs.alfworld.planner import PlannerPolicy, play_group, play_tasks
from agentrl.types import EnvStep


async def _play_generated(report, count: int | None) -> list:
    games = sorted(report.games, key=lambda g: g.path.stat().st_size)[:count]
    results = await play_tasks(
        [g.to_task() for g in games], make_alfworld_group, group_size=2, concurrency=2
    )
    for result in results:
        assert result.success_rate == 1.0, result
        assert result.plan_source == "walkthrough"
        assert all(b.steps == len(b.actions) > 0 and b.error is None for b in result.branches)
    return results


async def test_planner_wins_generated_games(alfworld_games) -> None:
    """Three games through the whole stack (generation already played every game's plan)."""
    await _play_generated(alfworld_games, 3)


@pytest.mark.slow
async def test_planner_wins_every_generated_game(alfworld_games) -> None:
    results = await _play_generated(alfworld_games, None)
    assert {r.task.task_type for r in results} == set(TASK_TYPES)


async def test_expert_plan_wins_without_walkthrough(alfworld_games) -> None:
    game = min(alfworld_games.games, key=lambda g: g.path.stat().st_size)
    policy = PlannerPolicy(source="expert")
    group = make_alfworld_group(game.to_task(), 1)
    try:
        (result,) = await play_group(group, policy)
    finally:
        await group.close()
    assert result.won and policy.plan_source == "expert"


def test_expert_names_match_the_game(alfworld_games) -> None:
    game = max(alfworld_games.games, key=lambda g: g.path.stat().st_size)  # many duplicates
    world = parse_world(json.loads(game.path.read_text())["pddl_problem"])
    engine = TextWorldEngine(str(game.path))
    try:
        first = engine.reset()
    finally:
        engine.close()
    goto = {c[len("go to ") :] for c in first.admissible_commands if c.startswith("go to ")}
    receptacles = {world.names[r] for r, _ in world.pairs("receptacletype")}
    assert goto == receptacles


def test_next_action_follows_the_plan() -> None:
    policy = PlannerPolicy()
    policy.plan, policy._cursor = ("go to desk 1", "use desklamp 1"), [0, 0]
    live, done = EnvStep("obs"), EnvStep("obs", done=True)
    assert policy.next_action(0, live) == "go to desk 1"
    assert policy.next_action(1, done) is None
    assert policy.next_action(1, live) == "go to desk 1"
    assert policy.next_action(0, live) == "use desklamp 1"
    assert policy.next_action(0, live) is None


def test_expert_gives_up_when_it_cannot_solve() -> None:
    problem = "(define (problem p) (:init (atLocation agent1 l1)) (:goal (and)))"
    assert (
        expert_plan(parse_world(problem), ExpertTask("pick_and_place_simple", "Mug", "Desk"))
        is None
    )
    with pytest.raises(ValueError, match="init"):
        parse_world("(define (problem p))")


def _official_sample(root: Path, per_type: int, seed: int) -> list:
    games = find_games(root)
    rng = random.Random(seed)
    picked = []
    for task_type in TASK_TYPES:
        pool = [g for g in games if g.task_type == task_type]
        picked += rng.sample(pool, min(per_type, len(pool)))
    return picked


async def test_planner_wins_official_games(official_alfworld_root: Path) -> None:
    games = _official_sample(official_alfworld_root, per_type=1, seed=0)
    results = await play_tasks([g.to_task() for g in games], make_alfworld_group, concurrency=2)
    assert [r.success_rate for r in results] == [1.0] * len(games)
    assert all(r.plan_source == "expert" for r in results)


@pytest.mark.slow
@pytest.mark.timeout(7200)
async def test_expert_wins_every_official_game(official_alfworld_root: Path) -> None:
    """The planner (expert plans) wins all 260 shared official games (~15 CPU-minutes)."""
    games = find_games(official_alfworld_root)
    results = await play_tasks([g.to_task() for g in games], make_alfworld_group, concurrency=2)
    failures = [(r.task.task_id, r.branches) for r in results if r.success_rate < 1.0]
    assert failures == []
    assert all(r.plan_source == "expert" for r in results)


@pytest.mark.slow
async def test_fast_downward_plans_win(alfworld_games) -> None:
    game = min(alfworld_games.games, key=lambda g: g.path.stat().st_size)
    policy = PlannerPolicy(source="fast_downward", plan_timeout=300)
    group = make_alfworld_group(game.to_task(), 1)
    try:
        (result,) = await play_group(group, policy)
    finally:
        await group.close()
    assert result.won and policy.plan_source == "fast_downward"


@pytest.mark.parametrize("window", [None, 1], ids=["whole-history", "window-1"])
@pytest.mark.parametrize("group", [1, 2])
async def test_the_planner_player_sends_plain_commands(alfworld_games, window, group) -> None:
    """`planner_player` with a `PlainCommandProtocol` (the from-scratch recipe's): each reply
    is the plan's command itself, through the rollout engine, and the planner wins, in every
    branch, also when a context window cuts its prompts (the scripted sampler reads the turn
    from the request's keyed seed, not from the prompt: a cut prompt extends no earlier one)."""
    pytest.importorskip("transformers")
    from agentrl.algo.rewards import WinMinusInvalid
    from agentrl.chat import ChatRenderer
    from agentrl.envs.alfworld import alfworld_group_factory
    from agentrl.envs.alfworld.baseline import planner_player
    from agentrl.envs.alfworld.tools import alfworld_plain_protocol
    from agentrl.recipes.tokenizer import bpe_tokenizer
    from agentrl.rollout import FullHistory, RecentTurns, RolloutConfig

    context = FullHistory() if window is None else RecentTurns(window)
    protocol = alfworld_plain_protocol(restate_task=True, include_admissible=True)
    tokenizer = bpe_tokenizer([], 0)  # byte-level: any text round-trips
    factory = alfworld_group_factory()
    play = planner_player(
        env_factory=factory,
        renderer=ChatRenderer(tokenizer, protocol.tools),
        protocol=protocol,
        rollout=RolloutConfig(
            group_size=group, max_env_steps=50, max_trajectory_tokens=1 << 20, context=context
        ),
        reward_fn=WinMinusInvalid(),
    )
    try:
        for game in alfworld_games.games[:2]:
            task = game.to_task()
            trajectories = (await play(task)).trajectories
            plan = PlannerPolicy()
            await plan.start(task, 1)
            assert len(plan.plan) >= 3  # under the window, the third prompt is cut
            assert len(trajectories) == group
            for trajectory in trajectories:
                replies = [tokenizer.decode(t.completion_tokens) for t in trajectory.turns]
                assert trajectory.won and trajectory.invalid_actions == 0
                assert [r.removesuffix("<|im_end|>").strip() for r in replies] == list(plan.plan)
    finally:
        await factory.close()
