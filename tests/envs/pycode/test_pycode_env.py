"""The pycode environment: tasks, the env checker, rollouts with scripted samplers and the real
Qwen tokenizer (function-tool turns, parallel calls, invalid calls, a runaway branch)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.envs.pycode import (
    FAMILIES,
    SPLIT_FAMILIES,
    TRAIN_FAMILIES,
    PycodeOptions,
    PycodeReward,
    SandboxLimits,
    check_answer,
    problem_for,
    pycode_group_factory,
    pycode_tasks,
    pycode_tool_protocol,
    run_sandboxed,
)
from agentrl.records import TrajectoryRecord
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler, check_env_group
from agentrl.tools import FunctionTools
from agentrl.types import EnvAction, EnvStep, ParseErrorKind, StopReason, ToolCall, TurnStatus

FAST = PycodeOptions(
    limits=SandboxLimits(cpu_seconds=1, wall_seconds=3.0, memory_bytes=256 * 1024**2)
)


def test_splits_are_deterministic_and_disjoint() -> None:
    train = pycode_tasks("train", 200)
    assert [t.task_id for t in train] == [t.task_id for t in pycode_tasks("train", 200)]
    assert {t.task_type for t in train} == set(TRAIN_FAMILIES)
    seen = pycode_tasks("valid_seen", 60)
    unseen = pycode_tasks("valid_unseen", 60)
    questions = {t.description for t in train}
    assert not questions & {t.description for t in seen}
    assert not questions & {t.description for t in unseen}
    assert {t.task_type for t in unseen} == set(FAMILIES)
    assert set(SPLIT_FAMILIES["valid_unseen"]) - set(TRAIN_FAMILIES) == {"dates", "strings"}
    for task in [*train[:3], *seen[:3], *unseen[:3]]:
        assert problem_for(task.task_id).question == task.description
    with pytest.raises(ValueError, match="pycode/<split>/<family>/<index>"):
        problem_for("toy-3")


def test_every_family_reference_program_prints_the_exact_answer() -> None:
    rng = random.Random(7)
    for name, family in FAMILIES.items():
        for hard in (False, True):
            problem = family(rng, hard)
            result = run_sandboxed(problem.code)
            assert result.ok, (name, result.stderr)
            printed = result.stdout.strip().removeprefix("ANSWER: ")
            assert check_answer(printed, problem.answer), name
            assert not check_answer(printed + "1", problem.answer)


def test_answers_are_compared_exactly_after_canonical_form() -> None:
    assert check_answer(" 1,234. ", "1234") and check_answer("'Tuesday'", "tuesday")
    assert not check_answer("1233", "1234") and not check_answer("12340", "1234")


def test_env_checker_passes_on_the_pycode_group() -> None:
    task = pycode_tasks("valid_seen", 1)[0]
    answer = problem_for(task.task_id).answer

    def choose(step: EnvStep, rng: random.Random) -> EnvAction:
        if step.outputs and rng.random() < 0.3:  # never on the first turn
            return (ToolCall("submit", {"answer": answer}),)
        return (ToolCall("run_python", {"code": f"print({rng.randint(0, 9)})"}),)

    bad: EnvAction = (ToolCall("run_python", {"code": "print(1)", "timeout": "3"}),)
    report = asyncio.run(
        check_env_group(
            lambda: pycode_group_factory(FAST)(task, 3),
            max_steps=8,
            choose_action=choose,
            invalid_action=bad,
            probe_action=(ToolCall("submit", {"answer": answer}),),
        )
    )
    assert report.group_size == 3 and report.invalid_actions_tried > 0


def play(tokenizer: Any, scripts: list[list[str]], protocol: FunctionTools, task_index: int = 0):  # type: ignore[no-untyped-def]
    task = pycode_tasks("valid_seen", task_index + 1)[task_index]
    renderer = ChatRenderer(tokenizer, protocol.tools)
    group = asyncio.run(
        rollout_group(
            task,
            env_factory=pycode_group_factory(FAST),
            sampler=ScriptedSampler(tokenizer, scripts),
            renderer=renderer,
            protocol=protocol,
            config=RolloutConfig(group_size=len(scripts), max_env_steps=6, retry_backoff=0.0),
            reward_fn=PycodeReward(call_penalty=0.05),
        )
    )
    return task, renderer, group


def test_rollout_run_submit_invalid_and_wrong(qwen_tokenizer: Any) -> None:
    protocol = pycode_tool_protocol()
    task = pycode_tasks("valid_seen", 1)[0]
    problem = problem_for(task.task_id)
    run = protocol.call_text(ToolCall("run_python", {"code": problem.code}))
    right = protocol.call_text(ToolCall("submit", {"answer": problem.answer}))
    missing = protocol.call_text(ToolCall("run_python", {"source": "print(1)"}))
    wrong = protocol.call_text(ToolCall("submit", {"answer": "-1"}))
    _, _, group = play(qwen_tokenizer, [[run, right], [missing, wrong]], protocol)
    won, lost = group.trajectories
    assert won.stop_reason is StopReason.WON and won.reward == pytest.approx(1 - 0.05)
    assert PycodeReward(call_penalty=0.05).turn_rewards(won) == pytest.approx((-0.05, 1.0))
    first = won.turns[0]
    assert first.status is TurnStatus.EXECUTED and first.parsed.calls[0].name == "run_python"
    assert first.tool_message is not None and first.tool_message.name == "run_python"
    assert first.tool_message.content.startswith(f"ANSWER: {problem.answer}\n")
    assert "[step 1 of 6]" in first.tool_message.content
    assert lost.stop_reason is StopReason.ENV_DONE and not lost.won
    bad = lost.turns[0]
    assert bad.status is TurnStatus.INVALID_FORMAT and bad.invalid and bad.env_step is None
    assert bad.parsed.error is not None
    assert bad.parsed.error.kind is ParseErrorKind.INVALID_ARGUMENTS
    assert "code: Field required" in bad.parsed.error.detail
    assert "source: Extra inputs are not permitted" in bad.parsed.error.detail
    assert bad.tool_message is not None and "Nothing was run" in bad.tool_message.content
    assert lost.reward == pytest.approx(-0.1)


def test_parallel_calls_run_in_order_one_tool_message_each(qwen_tokenizer: Any) -> None:
    protocol = pycode_tool_protocol(max_calls=3)
    task = pycode_tasks("valid_seen", 1)[0]
    answer = problem_for(task.task_id).answer
    calls = [
        ToolCall("run_python", {"code": "open('n.txt', 'w').write('5')\nprint('first')"}),
        ToolCall("run_python", {"code": "print('second', open('n.txt').read())"}),
    ]
    both = protocol.call_text(*calls)
    too_many = protocol.call_text(*calls, *calls)
    right = protocol.call_text(ToolCall("submit", {"answer": answer}))
    _, renderer, group = play(qwen_tokenizer, [[both, right], [too_many, right]], protocol)
    good, greedy = group.trajectories
    turn = good.turns[0]
    assert [c.name for c in turn.parsed.calls] == ["run_python", "run_python"]
    assert turn.env_step is not None and turn.env_step.outputs == ("first\n", "second 5\n")
    messages = turn.tool_messages
    assert [m.content.split("\n")[0] for m in messages] == ["first", "second 5"]
    assert "[step" not in messages[0].content and "[step 1 of 6]" in messages[1].content
    second = good.turns[1]
    text = renderer.tokenizer.decode(list(second.prompt_tokens))
    assert text.index("first") < text.index("second 5")
    assert list(second.prompt_tokens) == renderer.render(
        list(good.messages[:-1]), add_generation_prompt=True
    )  # the extended prompt equals a full render of the conversation
    assert good.won and good.reward == pytest.approx(1 - 2 * 0.05)
    record = TrajectoryRecord.from_json(TrajectoryRecord.from_trajectory(good).to_json())
    assert record.turns[0].calls is not None
    assert [(c.name, c.output) for c in record.turns[0].calls] == [
        ("run_python", "first\n"),
        ("run_python", "second 5\n"),
    ]
    back = record.to_trajectory().turns[0]
    assert back.parsed.calls == turn.parsed.calls and back.env_step is not None
    assert back.env_step.outputs == turn.env_step.outputs
    error = greedy.turns[0].parsed.error
    assert error is not None and error.kind is ParseErrorKind.MULTIPLE_CALLS
    assert greedy.won and greedy.invalid_actions == 1


def test_a_runaway_branch_does_not_stall_the_group(qwen_tokenizer: Any) -> None:
    protocol = pycode_tool_protocol()
    task = pycode_tasks("valid_seen", 1)[0]
    answer = problem_for(task.task_id).answer
    loop = protocol.call_text(ToolCall("run_python", {"code": "while True:\n    pass"}))
    bomb = protocol.call_text(ToolCall("run_python", {"code": "import os\nwhile True: os.fork()"}))
    right = protocol.call_text(ToolCall("submit", {"answer": answer}))
    _, _, group = play(qwen_tokenizer, [[loop, right], [bomb, right], [right]], protocol)
    looped, bombed, quick = group.trajectories
    assert all(t.won for t in group.trajectories)
    assert looped.turns[0].tool_message is not None
    # the CPU limit (5 s) stops it, or on a loaded machine, where the loop gets under half a
    # core, the wall-clock limit (10 s): either way the branch ends and the group goes on
    stopped = looped.turns[0].tool_message.content
    assert stopped.startswith(
        ("[stopped: CPU time limit exceeded]", "[stopped: wall-clock time limit exceeded")
    ), stopped
    assert bombed.turns[0].tool_message is not None
    assert "starting processes is not allowed" in bombed.turns[0].tool_message.content
    assert len(quick.turns) == 1


def test_call_penalty_from_the_config() -> None:
    from agentrl.config import EvalConfig
    from agentrl.rewards import WinMinusInvalid

    out = Path("unused.jsonl")
    config = EvalConfig(env="pycode", call_penalty=0.02, invalid_penalty=0.2, output=out)  # type: ignore[arg-type]
    assert config.reward_fn() == PycodeReward(1.0, 0.2, 0.02)
    assert EvalConfig(env="pycode", output=out).reward_fn() == WinMinusInvalid()  # type: ignore[arg-type]
