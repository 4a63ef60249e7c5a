"""The ALFWorld tool protocol (`alfworld_step`): pure text, no textworld needed."""

from __future__ import annotations

import subprocess
import sys

from agentrl.envs.alfworld.tools import (
    ALFWORLD_TOOL_NAME,
    alfworld_plain_protocol,
    alfworld_tool_protocol,
)
from agentrl.tools import ToolProtocol, ToolResult
from agentrl.tools.command import PlainCommandProtocol
from agentrl.types import EnvStep, ParsedAction, ParseErrorKind, TaskInfo, TurnStatus

STEP = EnvStep(
    observation="You are in the middle of a room. Looking quickly around you, you see a "
    "countertop 1, a fridge 1, and a microwave 1.\n\nYour task is to: heat some apple and "
    "put it in fridge.",
    admissible_actions=("go to countertop 1", "go to fridge 1", "help", "inventory", "look"),
)
TASK = TaskInfo(task_id="g", description="heat some apple and put it in fridge.")


def test_is_pure_text() -> None:
    """Importing the protocol pulls in neither textworld nor alfworld (checked in a fresh
    interpreter, since other tests may have imported them here)."""
    code = (
        "import sys, agentrl.envs.alfworld.tools\n"
        "mods = ('textworld', 'alfworld', 'torch', 'transformers')\n"
        "bad = [m for m in mods if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_schema_lists_the_command_forms() -> None:
    protocol = alfworld_tool_protocol()
    assert isinstance(protocol, ToolProtocol)
    (schema,) = protocol.tools
    function = schema["function"]
    assert isinstance(function, dict) and function["name"] == ALFWORLD_TOOL_NAME == "alfworld_step"
    description = str(function["description"])
    for form in (
        "go to",
        "open",
        "close",
        "take OBJECT from",
        "move OBJECT to",
        "heat OBJECT with",
        "cool OBJECT with",
        "clean OBJECT with",
        "use",
        "examine",
        "look",
        "inventory",
    ):
        assert form in description, form


def test_system_prompt_rules() -> None:
    prompt = alfworld_tool_protocol().system_prompt
    assert "one tool call per turn" in prompt
    assert "'apple 1'" in prompt
    assert "Never declare the task complete" in prompt


def test_first_user_message() -> None:
    _, user = alfworld_tool_protocol().initial_messages(TASK, STEP, max_env_steps=50)
    assert "Step 0 of 50." in user.content
    assert "Your task is to: heat some apple" in user.content
    assert user.content.count("heat some apple") == 1  # no duplicated task line
    assert "Available actions (copy one exactly):\ngo to countertop 1\n" in user.content
    assert "\nhelp" not in user.content


def test_tool_messages() -> None:
    protocol = alfworld_tool_protocol(include_admissible=False)
    bad = ParsedAction.failure(ParseErrorKind.MULTIPLE_CALLS, "2 tool calls")
    message = protocol.tool_message(
        ToolResult(TurnStatus.INVALID_FORMAT, STEP, bad, env_steps=4, max_env_steps=50)
    )
    assert message.name == "alfworld_step"
    assert message.content.startswith("Status: invalid tool-call format (2 tool calls).")
    assert "not advanced" in message.content and "Step 4 of 50." in message.content
    assert "Available actions" not in message.content
    won = protocol.tool_message(
        ToolResult(TurnStatus.WON, STEP, ParsedAction(action="look"), 5, 50)
    )
    assert won.content.startswith("Status: completed successfully.")
    protocol = alfworld_tool_protocol()
    executed = protocol.tool_message(
        ToolResult(TurnStatus.EXECUTED, STEP, ParsedAction(action="look"), 5, 50)
    )
    assert "Available actions (copy one exactly):" in executed.content


def test_parses_both_call_forms() -> None:
    protocol = alfworld_tool_protocol()
    for style in ("xml", "json"):
        parsed = protocol.parse(protocol.call_text("take apple 1 from countertop 1", style=style))
        assert parsed.action == "take apple 1 from countertop 1"


def test_the_plain_protocol_is_the_command_and_the_observation() -> None:
    """`alfworld_plain_protocol`: no tools, no action list, no step counter; an executed turn's
    tool message is the observation alone, other turns lead with a short status line."""
    protocol = alfworld_plain_protocol()
    assert isinstance(protocol, ToolProtocol)
    assert protocol.tools == ()
    system, user = protocol.initial_messages(TASK, STEP, 30)
    assert system.content == "Reply with one command."
    assert user.content == f"Observation:\n{STEP.observation}"
    assert protocol.parse(" Go to  fridge 1\n").action == "go to fridge 1"
    assert protocol.call_text("go to fridge 1") == "go to fridge 1"
    assert protocol.parse("go to\nfridge 1").error is not None
    executed = ToolResult(TurnStatus.EXECUTED, STEP, ParsedAction(action="look"), 5, 30)
    assert protocol.tool_message(executed).content == f"Observation:\n{STEP.observation}"
    refused = ToolResult(TurnStatus.NOT_ADMISSIBLE, STEP, ParsedAction(action="fly"), 5, 30)
    assert protocol.tool_message(refused).content.startswith("Status: not admissible.\n")
    won = ToolResult(TurnStatus.WON, STEP, ParsedAction(action="look"), 5, 30)
    assert protocol.tool_message(won).content.startswith("Status: won.\nObservation:")
    restating = alfworld_plain_protocol(restate_task=True)
    with_task = ToolResult(TurnStatus.EXECUTED, STEP, ParsedAction(action="look"), 5, 30, TASK)
    assert restating.tool_message(with_task).content == (
        f"Task: {TASK.description}\nObservation:\n{STEP.observation}"
    )
    assert protocol.tool_message(with_task).content == f"Observation:\n{STEP.observation}"
    assert restating.tool_message(executed).content == f"Observation:\n{STEP.observation}"
    won_task = ToolResult(TurnStatus.WON, STEP, ParsedAction(action="look"), 5, 30, TASK)
    assert "Task:" not in restating.tool_message(won_task).content  # nothing left to do
    listed = PlainCommandProtocol()  # the default still lists actions and counts steps
    assert "Step 5 of 30." in listed.tool_message(executed).content
    assert "go to countertop 1" in listed.tool_message(executed).content


def test_local_lists_leave_out_the_moves_only() -> None:
    """`list_moves=False`: the lists drop the `go to` commands (`unlisted_prefixes`) and keep
    the rest in order; a list of moves alone is not shown; the moves stay readable replies."""
    step = EnvStep(
        observation="You arrive at fridge 1. The fridge 1 is closed.",
        admissible_actions=("examine fridge 1", "go to countertop 1", "inventory", "open fridge 1"),
    )
    local = alfworld_plain_protocol(restate_task=True, include_admissible=True, list_moves=False)
    executed = ToolResult(TurnStatus.EXECUTED, step, ParsedAction(action="look"), 5, 30, TASK)
    assert local.tool_message(executed).content == (
        "Available actions (copy one exactly):\nexamine fridge 1\ninventory\nopen fridge 1\n"
        f"Task: {TASK.description}\nObservation:\n{step.observation}"
    )
    full = alfworld_plain_protocol(restate_task=True, include_admissible=True)
    assert "\ngo to countertop 1\n" in full.tool_message(executed).content
    only_moves = EnvStep(
        observation="You arrive at sinkbasin 1.", admissible_actions=STEP.admissible_actions[:2]
    )
    _, user = local.initial_messages(TASK, only_moves, 30)
    assert user.content == f"Task: {TASK.description}\nObservation:\n{only_moves.observation}"
    assert local.parse("go to countertop 1").action == "go to countertop 1"
    unlisted = PlainCommandProtocol(include_admissible=False, unlisted_prefixes=("go to ",))
    assert "Available actions" not in unlisted.tool_message(executed).content
