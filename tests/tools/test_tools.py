"""The generic single-command tool protocol (`CommandTool`)."""

from __future__ import annotations

import json

import pytest

from agentrl.tools import CommandTool, StatusTexts, ToolProtocol, ToolResult
from agentrl.types import EnvStep, ParsedAction, ParseErrorKind, TaskInfo, TurnStatus

TOOL = CommandTool(name="do", description="Do one thing.", system_prompt="Use the tool.")
STEP = EnvStep(
    observation="You see a desk 1.\n",
    admissible_actions=("go to desk 1", "help", "look"),
)


def result(status: TurnStatus, parsed: ParsedAction, step: EnvStep = STEP) -> ToolResult:
    return ToolResult(status=status, step=step, parsed=parsed, env_steps=3, max_env_steps=50)


def test_is_a_tool_protocol() -> None:
    assert isinstance(TOOL, ToolProtocol)


def test_schema_is_one_function_with_one_string_parameter() -> None:
    (schema,) = TOOL.tools
    assert json.loads(json.dumps(schema)) == schema
    function = schema["function"]
    assert isinstance(function, dict)
    assert function["name"] == "do"
    assert function["parameters"] == {
        "type": "object",
        "properties": {"action": {"type": "string", "description": TOOL.parameter_description}},
        "required": ["action"],
        "additionalProperties": False,
    }


def test_initial_messages_list_task_step_observation_and_actions() -> None:
    task = TaskInfo(task_id="t", description="put a mug on the desk.")
    system, user = TOOL.initial_messages(task, STEP, max_env_steps=50)
    assert system.role == "system" and system.content == "Use the tool."
    assert user.role == "user"
    assert user.content == (
        "Task: put a mug on the desk.\nStep 0 of 50.\nObservation:\nYou see a desk 1.\n"
        "Available actions (copy one exactly):\ngo to desk 1\nlook"
    )


def test_task_line_is_dropped_when_the_observation_already_says_it() -> None:
    task = TaskInfo(task_id="t", description="put a mug on the desk.")
    step = EnvStep(observation="Your task is to: put a mug on the desk.", admissible_actions=("a",))
    _, user = TOOL.initial_messages(task, step, max_env_steps=5)
    assert "Task:" not in user.content


def test_admissible_list_can_be_turned_off() -> None:
    tool = CommandTool(name="do", description="d", system_prompt="s", include_admissible=False)
    _, user = tool.initial_messages(TaskInfo(task_id="t"), STEP, max_env_steps=5)
    assert "Available actions" not in user.content and "look" not in user.content
    message = tool.tool_message(result(TurnStatus.EXECUTED, ParsedAction(action="look")))
    assert "Available actions" not in message.content


@pytest.mark.parametrize(
    ("status", "parsed", "first_line"),
    [
        (TurnStatus.EXECUTED, ParsedAction(action="look"), "Status: executed 'look'."),
        (
            TurnStatus.NOT_ADMISSIBLE,
            ParsedAction(action="fly"),
            "Status: action not admissible: 'fly' cannot be executed here; nothing happened.",
        ),
        (
            TurnStatus.INVALID_FORMAT,
            ParsedAction.failure(ParseErrorKind.NO_CALL, "no call found"),
            "Status: invalid tool-call format (no call found). "
            "The environment state was not advanced.",
        ),
        (TurnStatus.WON, ParsedAction(action="look"), "Status: won. The task is complete."),
        (
            TurnStatus.ENDED,
            ParsedAction(action="look"),
            "Status: the episode ended without success.",
        ),
    ],
)
def test_tool_message_per_status(status: TurnStatus, parsed: ParsedAction, first_line: str) -> None:
    message = TOOL.tool_message(result(status, parsed))
    assert message.role == "tool" and message.name == "do"
    lines = message.content.split("\n")
    assert lines[0] == first_line
    assert lines[1] == "Step 3 of 50."
    has_observation = status is not TurnStatus.INVALID_FORMAT
    assert ("You see a desk 1." in message.content) is has_observation
    has_actions = status not in (TurnStatus.WON, TurnStatus.ENDED)
    assert ("go to desk 1" in message.content) is has_actions
    assert "help" not in lines


def test_parse_and_call_text_round_trip() -> None:
    for style in ("xml", "json"):
        parsed = TOOL.parse("Thinking done.\n" + TOOL.call_text("Go To Desk 1", style=style))
        assert parsed.action == "go to desk 1"
    assert TOOL.parse(TOOL.call_text("look"), truncated=True).error is not None
    with pytest.raises(ValueError, match="style"):
        TOOL.call_text("look", style="yaml")


def test_custom_status_texts() -> None:
    tool = CommandTool(
        name="do", description="d", system_prompt="s", status=StatusTexts(executed="OK {action}")
    )
    message = tool.tool_message(result(TurnStatus.EXECUTED, ParsedAction(action="look")))
    assert message.content.startswith("OK look\n")
