"""Turn semantics of the rollout engine, one test per row of the table in
docs/tools-and-rollout.md, each on the toy env and on a generated ALFWorld game, with scripted
samplers and the real Qwen tokenizer.

For every turn status: does it count as invalid, does it use a step, does the episode go on,
and what does the tool message say, under the default (the published recipe) and the options
(`step_counting="env_calls"`, `cut_reply="end"`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.env import EnvGroup
from agentrl.envs.toy import ToyEnvGroup, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler, ScriptItem
from agentrl.tools import CommandTool
from agentrl.types import (
    CutReply,
    ParseErrorKind,
    StepCounting,
    StopReason,
    TaskInfo,
    Trajectory,
    TurnStatus,
)

ROOMY = 50
"""An env step cap that never binds in these scripts."""


@dataclass(frozen=True)
class Case:
    """One environment with the actions the rows need."""

    name: str
    task: TaskInfo
    protocol: CommandTool
    make: Callable[[TaskInfo, int, int], EnvGroup]
    """(task, group size, the env's own step cap) -> group."""
    plan: tuple[str, ...]
    """Actions that win."""
    harmless: str
    """An admissible action that changes nothing important."""
    bad: str = "fly to the moon"
    """A parsed but non-admissible action."""
    losing: str | None = None
    """An admissible action that ends the episode without success (None: the env has none)."""


def _toy_case() -> Case:
    def make(task: TaskInfo, size: int, cap: int) -> EnvGroup:
        return ToyEnvGroup(task, size, max_steps=cap)

    return Case(
        name="toy",
        task=toy_tasks(1, seed=0)[0],  # key 1 on shelf 1, target bin 1
        protocol=toy_tool_protocol(),
        make=make,
        plan=("go to shelf 1", "take key 1 from shelf 1", "go to bin 1", "move key 1 to bin 1"),
        harmless="look",
        losing="drop key 1",
    )


def _alfworld_case(report: Any) -> Case:
    from agentrl.envs.alfworld import AlfworldEnvGroup, AlfworldEnvOptions, PlannerPolicy
    from agentrl.envs.alfworld.tools import alfworld_tool_protocol

    task = next(g.to_task() for g in report.games if g.split == "train")
    policy = PlannerPolicy()
    asyncio.run(policy.start(task, 1))

    def make(task: TaskInfo, size: int, cap: int) -> EnvGroup:
        return AlfworldEnvGroup(task, size, AlfworldEnvOptions(max_steps=cap))

    return Case(
        name="alfworld",
        task=task,
        protocol=alfworld_tool_protocol(),
        make=make,
        plan=tuple(policy.plan),
        harmless="look",
    )


@pytest.fixture(scope="module", params=["toy", "alfworld"])
def case(request: pytest.FixtureRequest) -> Case:
    if request.param == "toy":
        return _toy_case()
    pytest.importorskip("textworld")
    return _alfworld_case(request.getfixturevalue("alfworld_games"))


def _play(
    case: Case,
    tokenizer: Any,
    script: Sequence[ScriptItem],
    *,
    env_cap: int = ROOMY,
    **options: Any,
) -> Trajectory:
    config = RolloutConfig(group_size=1, retry_backoff=0.0, sampler_retries=0, **options)
    sampler = ScriptedSampler(tokenizer, [list(script)])
    group = asyncio.run(
        rollout_group(
            case.task,
            env_factory=lambda task, size: case.make(task, size, env_cap),
            sampler=sampler,
            renderer=ChatRenderer(tokenizer, case.protocol.tools),
            protocol=case.protocol,
            config=config,
        )
    )
    assert sampler.violations == []
    (trajectory,) = group.trajectories
    return trajectory


def _call(case: Case, action: str) -> str:
    return case.protocol.call_text(action)


def _tool_text(trajectory: Trajectory, index: int) -> str:
    message = trajectory.turns[index].tool_message
    assert message is not None, f"turn {index} has no tool message"
    return message.content


# -- one test per row --------------------------------------------------------------------------


def test_executed(case: Case, qwen_tokenizer: Any) -> None:
    script = [_call(case, case.harmless), *(_call(case, a) for a in case.plan)]
    t = _play(case, qwen_tokenizer, script)
    first = t.turns[0]
    assert first.status is TurnStatus.EXECUTED and not first.invalid and not first.ended
    text = _tool_text(t, 0)
    assert text.startswith(f"Status: executed {case.harmless!r}.")
    assert "Step 1 of 50." in text and "Observation:" in text
    assert "Available actions" in text
    assert t.won and t.invalid_actions == 0


def test_not_admissible(case: Case, qwen_tokenizer: Any) -> None:
    t = _play(case, qwen_tokenizer, [_call(case, case.bad), *(_call(case, a) for a in case.plan)])
    first = t.turns[0]
    assert first.status is TurnStatus.NOT_ADMISSIBLE and first.invalid and not first.ended
    text = _tool_text(t, 0)
    assert text.startswith("Status: action not admissible:") and "Step 1 of 50." in text
    assert "Observation:" in text
    assert t.won and t.invalid_actions == 1 and t.reward == pytest.approx(0.9)


@pytest.mark.parametrize("counting", [StepCounting.TURNS, StepCounting.ENV_CALLS])
def test_invalid_format(case: Case, qwen_tokenizer: Any, counting: StepCounting) -> None:
    script = ["I will just talk.", *(_call(case, a) for a in case.plan)]
    t = _play(case, qwen_tokenizer, script, step_counting=counting)
    first = t.turns[0]
    assert first.status is TurnStatus.INVALID_FORMAT and first.invalid and first.env_step is None
    text = _tool_text(t, 0)
    assert text.startswith("Status: invalid tool-call format (no tool call found")
    assert "Observation:" not in text and "Available actions" in text
    used = 1 if counting is StepCounting.TURNS else 0
    assert f"Step {used} of 50." in text
    assert t.won and t.invalid_actions == 1 and t.env_steps == len(case.plan)


@pytest.mark.parametrize("mode", [CutReply.CONTINUE, CutReply.END])
def test_cut_reply(case: Case, qwen_tokenizer: Any, mode: CutReply) -> None:
    rambling = "Let me think about this very carefully. " * 30 + _call(case, case.plan[0])
    script = [rambling, *(_call(case, a) for a in case.plan)]
    t = _play(case, qwen_tokenizer, script, max_assistant_tokens=40, cut_reply=mode)
    first = t.turns[0]
    assert len(first.completion_tokens) == 40 and first.status is TurnStatus.INVALID_FORMAT
    assert first.parsed.error is not None and first.parsed.error.kind is ParseErrorKind.TRUNCATED
    assert first.invalid
    if mode is CutReply.CONTINUE:  # the recipe: an invalid-format turn, the episode goes on
        text = _tool_text(t, 0)
        assert "cut off by the per-turn token limit" in text and "Step 1 of 50." in text
        assert t.won and t.invalid_actions == 1 and t.reward == pytest.approx(0.9)
    else:
        assert t.stop_reason is StopReason.ASSISTANT_TOKEN_LIMIT and len(t.turns) == 1
        assert first.tool_message is None and t.invalid_actions == 1
        assert t.reward == pytest.approx(-0.1)


def test_won(case: Case, qwen_tokenizer: Any) -> None:
    t = _play(case, qwen_tokenizer, [_call(case, a) for a in case.plan])
    last = t.turns[-1]
    assert last.status is TurnStatus.WON and last.ended and not last.invalid
    assert last.tool_message is None and t.stop_reason is StopReason.WON and t.reward == 1.0


def test_ended_without_success(case: Case, qwen_tokenizer: Any) -> None:
    if case.losing is not None:  # the env's own end (the toy key breaks)
        script = [_call(case, case.plan[0]), _call(case, case.plan[1]), _call(case, case.losing)]
        t = _play(case, qwen_tokenizer, script)
        expected = StopReason.ENV_DONE
    else:  # ALFWorld ends only at its own step cap: an executed action on the last step
        t = _play(case, qwen_tokenizer, [_call(case, case.harmless)] * 3, env_cap=3)
        expected = StopReason.MAX_STEPS
    last = t.turns[-1]
    assert last.status is TurnStatus.ENDED and last.ended and not last.invalid
    assert last.tool_message is None and t.stop_reason is expected
    assert t.invalid_actions == 0 and t.reward == 0.0


@pytest.mark.parametrize("cap", ["env", "rollout"])
def test_not_admissible_on_the_last_step_is_invalid(
    case: Case, qwen_tokenizer: Any, cap: str
) -> None:
    """The recipe's example: [bad, ok, bad, ok, bad at the cap] scores -0.3, not -0.2."""
    bad, ok = _call(case, case.bad), _call(case, case.harmless)
    limits = {"env_cap": 5} if cap == "env" else {"max_env_steps": 5}
    t = _play(case, qwen_tokenizer, [bad, ok, bad, ok, bad], **limits)
    last = t.turns[-1]
    assert t.stop_reason is StopReason.MAX_STEPS and len(t.turns) == 5
    assert last.status is TurnStatus.NOT_ADMISSIBLE and last.invalid
    assert last.ended is (cap == "env")  # the env reported the end; the turn keeps both facts
    assert t.invalid_actions == 3 and t.reward == pytest.approx(-0.3)


@pytest.mark.parametrize("counting", [StepCounting.TURNS, StepCounting.ENV_CALLS])
def test_step_cap(case: Case, qwen_tokenizer: Any, counting: StepCounting) -> None:
    ok = _call(case, case.harmless)
    script = ["no call", ok, "no call", ok, ok]
    t = _play(case, qwen_tokenizer, script, max_env_steps=3, step_counting=counting)
    assert t.stop_reason is StopReason.MAX_STEPS
    if counting is StepCounting.TURNS:  # every reply used a step: the unparsed one ended it
        assert len(t.turns) == 3 and t.env_steps == 1
        assert t.turns[-1].status is TurnStatus.INVALID_FORMAT
        assert t.invalid_actions == 2 and t.reward == pytest.approx(-0.2)
    else:
        assert len(t.turns) == 5 and t.env_steps == 3
        assert t.invalid_actions == 2


def test_trajectory_budget(case: Case, qwen_tokenizer: Any) -> None:
    probe = _play(case, qwen_tokenizer, [_call(case, case.harmless)], max_env_steps=1)
    first_prompt = len(probe.turns[0].prompt_tokens)
    rambling = "Thinking. " * 200
    t = _play(
        case,
        qwen_tokenizer,
        [rambling],
        max_trajectory_tokens=first_prompt + 60,
        max_assistant_tokens=100,  # the trajectory budget (60 tokens left) binds first
    )
    assert t.stop_reason is StopReason.TOKEN_BUDGET and len(t.turns) == 1
    assert t.turns[0].invalid and t.turns[0].tool_message is None
    assert t.tokens.total <= first_prompt + 60
