"""Rollouts on generated ALFWorld games: scripted replies built from the planner's plan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.chat import ChatRenderer
from agentrl.datums import trajectory_to_datum
from agentrl.envs.alfworld import PlannerPolicy, generate_games, make_alfworld_group
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler, ScriptItem, synthetic_logprobs
from agentrl.types import ParseErrorKind, StopReason, TaskInfo, Trajectory, TurnStatus

PROTOCOL = alfworld_tool_protocol()


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[TaskInfo, tuple[str, ...]]]:
    """Two freshly generated, verified games and the planner's plan for each."""
    root: Path = tmp_path_factory.mktemp("alfworld")
    report = generate_games(root, train=2, seed=5, workers=1, progress=False)
    assert len(report.games) == 2
    out = []
    for game in report.games:
        task = game.to_task()
        policy = PlannerPolicy()
        asyncio.run(policy.start(task, 1))
        out.append((task, policy.plan))
    return out


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer, PROTOCOL.tools)


def check(trajectory: Trajectory, renderer: ChatRenderer) -> None:
    full = trajectory.full_tokens
    for turn in trajectory.turns:
        n = len(turn.prompt_tokens)
        assert full[:n] == turn.prompt_tokens
        assert full[n : n + len(turn.completion_tokens)] == turn.completion_tokens
        assert turn.logprobs == synthetic_logprobs(turn.completion_tokens, n)
    datum = trajectory_to_datum(trajectory, [0.5] * len(trajectory.turns))
    assert datum.num_assistant_tokens == trajectory.tokens.completion
    assert renderer.render(trajectory.messages[:-1], add_generation_prompt=True) == list(
        trajectory.turns[-1].prompt_tokens
    )


async def test_planner_scripts_on_a_generated_game(
    games: list[tuple[TaskInfo, tuple[str, ...]]], qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    task, plan = games[0]
    xml = [PROTOCOL.call_text(a) for a in plan]
    scripts: list[list[ScriptItem]] = [
        xml,
        [
            "<tool_call>\n<function=alfworld_step>\n<parameter=action>\nlook",  # malformed
            PROTOCOL.call_text("fly to the moon"),  # not admissible
            *[PROTOCOL.call_text(a.upper(), style="json") for a in plan],
        ],
        [xml[0], "I am thinking. " * 100 + xml[1], *xml[1:]],  # cut, then goes on
    ]
    sampler = ScriptedSampler(qwen_tokenizer, scripts)
    group = await rollout_group(
        task,
        env_factory=make_alfworld_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=RolloutConfig(group_size=3, max_assistant_tokens=200, retry_backoff=0.0),
    )
    assert sampler.violations == []
    assert sampler.calls[0].num_samples == 3
    assert all(c.num_samples == 1 for c in sampler.calls[1:])
    planned, sloppy, rambling = group.trajectories
    assert planned.stop_reason is StopReason.WON and planned.reward == 1.0
    assert len(planned.turns) == len(plan) and planned.invalid_actions == 0
    assert [t.status for t in sloppy.turns[:2]] == [
        TurnStatus.INVALID_FORMAT,
        TurnStatus.NOT_ADMISSIBLE,
    ]
    assert sloppy.turns[0].parsed.error is not None
    assert sloppy.turns[0].parsed.error.kind is ParseErrorKind.MALFORMED
    assert sloppy.won and sloppy.invalid_actions == 2 and sloppy.reward == pytest.approx(0.8)
    assert sloppy.env_steps == len(plan) + 1
    # A reply cut at the per-turn limit is an invalid-format turn and the episode goes on.
    assert rambling.stop_reason is StopReason.WON and rambling.invalid_actions == 1
    assert rambling.turns[1].status is TurnStatus.INVALID_FORMAT
    assert rambling.turns[1].parsed.error is not None
    assert rambling.turns[1].parsed.error.kind is ParseErrorKind.TRUNCATED
    assert rambling.reward == pytest.approx(0.9)
    initial_key = planned.turns[0].state_key
    assert initial_key is not None
    assert all(t.turns[0].state_key == initial_key for t in group.trajectories)
    assert sloppy.turns[1].state_key == initial_key  # the invalid call did not move the state
    for trajectory in group.trajectories:
        check(trajectory, renderer)
        assert "help" not in trajectory.messages[1].content.splitlines()


async def test_token_budget_on_alfworld(
    games: list[tuple[TaskInfo, tuple[str, ...]]], qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    task, plan = games[1]
    probe = ScriptedSampler(qwen_tokenizer, [[PROTOCOL.call_text(plan[0])]])
    config = RolloutConfig(group_size=1, max_env_steps=1)
    first = await rollout_group(
        task,
        env_factory=make_alfworld_group,
        sampler=probe,
        renderer=renderer,
        protocol=PROTOCOL,
        config=config,
    )
    budget = len(first.trajectories[0].turns[0].prompt_tokens) + 400
    sampler = ScriptedSampler(qwen_tokenizer, [[PROTOCOL.call_text(a) for a in plan]])
    group = await rollout_group(
        task,
        env_factory=make_alfworld_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=RolloutConfig(group_size=1, max_trajectory_tokens=budget),
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.TOKEN_BUDGET
    assert all(len(c.prompt) + c.params.max_tokens <= budget for c in sampler.calls)
    assert trajectory.tokens.total <= budget
    check(trajectory, renderer)
