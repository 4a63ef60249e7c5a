"""`FunctionTools` (one or parallel calls, schema errors), `FunctionEnvGroup`, and the
text-command special case (`command_of`, the toy env taking a call tuple)."""

from __future__ import annotations

import asyncio

import pytest

from agentrl.chat.dialects import QwenJsonDialect
from agentrl.env import command_of
from agentrl.envs.toy import ToyEnvGroup, toy_tasks, toy_tool_protocol
from agentrl.tools import (
    CallChecker,
    CallsChecker,
    FunctionEnv,
    FunctionEnvGroup,
    ToolProtocol,
    ToolResult,
    tool,
)
from agentrl.types import EnvStep, ParsedAction, ParseErrorKind, TaskInfo, ToolCall, TurnStatus


class Shop(FunctionEnv):
    """Buy items; `pay` ends the episode."""

    def __init__(self, task: TaskInfo) -> None:
        self.cart: list[str] = []

    def observation(self) -> str:
        return "Welcome."

    @tool
    def add(self, item: str, count: int = 1) -> str:
        """Put an item in the cart."""
        if item == "unicorn":
            raise ValueError("out of stock")
        self.cart.extend([item] * count)
        return f"cart: {len(self.cart)}"

    @tool
    async def pay(self) -> str:
        """Pay and leave."""
        self.done = self.won = bool(self.cart)
        self.done = True
        return "paid"


PROTOCOL = Shop.protocol("Shop.", max_calls=2)


def text(*calls: ToolCall) -> str:
    return PROTOCOL.call_text(*calls)


def test_protocol_kinds() -> None:
    assert isinstance(PROTOCOL, ToolProtocol) and isinstance(PROTOCOL, CallsChecker)
    command = toy_tool_protocol()
    assert isinstance(command, CallChecker) and not isinstance(command, CallsChecker)
    assert [t["function"]["name"] for t in PROTOCOL.tools] == ["add", "pay"]  # type: ignore[index]


def test_valid_calls_parse_in_order_with_a_summary() -> None:
    parsed = PROTOCOL.parse(
        text(ToolCall("add", {"item": "milk", "count": "2"}), ToolCall("pay", {}))
    )
    assert parsed.ok and [c.name for c in parsed.calls] == ["add", "pay"]
    assert parsed.action == "add(item='milk', count='2'); pay()"
    assert parsed.env_action == parsed.calls
    json_form = QwenJsonDialect().write(ToolCall("add", {"item": "tea"}))
    assert PROTOCOL.parse(json_form).calls == (ToolCall("add", {"item": "tea"}),)


@pytest.mark.parametrize(
    ("reply", "kind", "detail"),
    [
        ("just talking", ParseErrorKind.NO_CALL, "no tool call found"),
        (text(ToolCall("steal", {})), ParseErrorKind.UNKNOWN_TOOL, "unknown tool 'steal'"),
        (
            text(ToolCall("add", {"item": "milk", "count": "two"})),
            ParseErrorKind.INVALID_ARGUMENTS,
            "add: count: Input should be a valid integer",
        ),
        (
            text(ToolCall("pay", {}), ToolCall("add", {"colour": "red"})),
            ParseErrorKind.INVALID_ARGUMENTS,
            "call 2 (add): item: Field required; colour: Extra inputs are not permitted",
        ),
        (
            text(*[ToolCall("pay", {})] * 3),
            ParseErrorKind.MULTIPLE_CALLS,
            "3 tool calls; make at most 2 per turn",
        ),
    ],
)
def test_bad_turns_are_typed_errors(reply: str, kind: ParseErrorKind, detail: str) -> None:
    parsed = PROTOCOL.parse(reply)
    assert parsed.error is not None and parsed.error.kind is kind
    assert detail in parsed.error.detail and parsed.calls == ()
    message = PROTOCOL.tool_messages(
        ToolResult(TurnStatus.INVALID_FORMAT, EnvStep("x"), parsed, env_steps=1, max_env_steps=4)
    )
    assert len(message) == 1 and detail in message[0].content
    assert message[0].content.endswith("[step 1 of 4]")


def test_a_failed_parse_carries_no_calls() -> None:
    with pytest.raises(ValueError, match="no calls"):
        ParsedAction(
            action=None,
            error=ParsedAction.failure(ParseErrorKind.NO_CALL, "x").error,
            calls=(ToolCall("pay", {}),),
        )


def test_group_runs_calls_in_order_reports_errors_and_skips_after_the_end() -> None:
    group = FunctionEnvGroup(TaskInfo("shop"), 3, Shop)

    async def run() -> list[EnvStep]:
        first = await group.reset()
        assert first[0].observation == "Welcome." and first[0] == first[2]
        steps = await group.step(
            [
                (ToolCall("add", {"item": "tea"}), ToolCall("add", {"item": "jam", "count": "2"})),
                (ToolCall("add", {"item": "unicorn"}),),
                (ToolCall("pay", {}), ToolCall("add", {"item": "tea"})),
            ]
        )
        with pytest.raises(TypeError, match="FunctionTools protocol"):
            await group.step(["add tea", None, None])
        await group.close()
        await group.close()
        return steps

    tea, unicorn, paid = asyncio.run(run())
    assert tea.outputs == ("cart: 1", "cart: 3") and tea.admissible and not tea.done
    assert unicorn.outputs == ("Error: ValueError: out of stock",) and not unicorn.admissible
    assert paid.done and not paid.won and paid.outputs[1].startswith("Skipped")


def test_text_command_envs_read_either_form() -> None:
    assert command_of("look") == "look"
    assert command_of((ToolCall("toy_step", {"action": "look"}),)) == "look"
    with pytest.raises(ValueError, match="one call with one argument"):
        command_of((ToolCall("a", {"x": "1"}), ToolCall("b", {"x": "2"})))
    task = toy_tasks(1, seed=0)[0]

    async def both() -> tuple[list[EnvStep], list[EnvStep]]:
        by_text, by_call = ToyEnvGroup(task, 1), ToyEnvGroup(task, 1)
        first = await by_text.reset()
        await by_call.reset()
        action = first[0].admissible_actions[0]
        return (
            await by_text.step([action]),
            await by_call.step([(ToolCall("toy_step", {"action": action}),)]),
        )

    a, b = asyncio.run(both())
    assert a == b
