"""`FunctionTools`: a tool protocol over several function tools, with one or parallel calls.

A turn makes one call (`max_calls=1`, the default) or up to `max_calls` calls, read by the model
family's dialect and validated against each tool's schema here: an unknown tool or a missing,
mistyped or extra argument makes the whole turn invalid (nothing runs) with the schema's own
message. A valid turn sends its calls to the environment in order (`ParsedAction.calls`), and
each call's result comes back as its own tool message, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentrl.chat.dialects.base import ToolCallDialect
from agentrl.chat.dialects.qwen import QwenXmlDialect
from agentrl.core.types import (
    EnvStep,
    JsonObject,
    Message,
    ParsedAction,
    ParseErrorKind,
    TaskInfo,
    ToolCall,
    TurnStatus,
)
from agentrl.tools.functions import FunctionTool, ToolArgumentError
from agentrl.tools.protocol import ToolResult, parse_with_dialect

__all__ = [
    "FunctionTools",
    "call_summary",
    "call_tool_messages",
    "check_tool_calls",
    "first_messages",
]

_SHOWN = 40


def call_summary(calls: Sequence[ToolCall]) -> str:
    """One line naming the calls, e.g. `run_python(code='print(1)'); submit(answer='1')`."""
    parts = []
    for call in calls:
        args = []
        for key, value in call.arguments.items():
            text = " ".join(value.split())
            text = text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
            args.append(f"{key}={text!r}")
        parts.append(f"{call.name}({', '.join(args)})")
    return "; ".join(parts)


def check_tool_calls(
    calls: Sequence[ToolCall],
    *,
    max_calls: int,
    validator: Callable[[str], Callable[[ToolCall], object] | None],
    known: Sequence[str],
) -> ParsedAction:
    """Validate a turn's calls: at least one, at most `max_calls`, each naming a tool
    (`validator(name)`: its argument check, None for an unknown name; `known`: the names an
    error lists) with valid arguments. The first bad call fails the turn; never raises."""
    if not calls:
        return ParsedAction.failure(ParseErrorKind.NO_CALL, "no tool call found")
    if len(calls) > max_calls:
        return ParsedAction.failure(
            ParseErrorKind.MULTIPLE_CALLS,
            f"{len(calls)} tool calls; make at most {max_calls} per turn",
        )
    for index, call in enumerate(calls):
        check = validator(call.name)
        where = f"call {index + 1} ({call.name})" if len(calls) > 1 else call.name
        if check is None:
            return ParsedAction.failure(
                ParseErrorKind.UNKNOWN_TOOL,
                f"unknown tool {call.name!r}; known: {', '.join(known)}",
            )
        try:
            check(call)
        except ToolArgumentError as exc:
            return ParsedAction.failure(ParseErrorKind.INVALID_ARGUMENTS, f"{where}: {exc}")
        except Exception as exc:  # a validator bug must not kill the rollout
            detail = f"{where}: arguments rejected ({type(exc).__name__}: {exc})"
            return ParsedAction.failure(ParseErrorKind.INVALID_ARGUMENTS, detail)
    return ParsedAction(action=call_summary(calls), calls=tuple(calls))


def call_tool_messages(
    result: ToolResult, *, step_line: str, invalid_text: str
) -> tuple[Message, ...]:
    """One message per call (its output), the step counter after the last; one error message
    (`invalid_text` with the parse error's detail) for an invalid turn."""
    counter = step_line.format(step=result.env_steps, max_steps=result.max_env_steps)
    parsed = result.parsed
    if result.status is TurnStatus.INVALID_FORMAT or not parsed.calls:
        detail = parsed.error.detail if parsed.error is not None else "no call"
        text = invalid_text.format(detail=detail)
        return (Message(role="tool", content=f"{text}\n{counter}"),)
    outputs = list(result.step.outputs)
    if len(outputs) != len(parsed.calls):  # an env that reports one text for the turn
        outputs = [result.step.observation] + [""] * (len(parsed.calls) - 1)
    messages = []
    for index, (call, output) in enumerate(zip(parsed.calls, outputs, strict=True)):
        last = index == len(outputs) - 1
        content = f"{output}\n{counter}" if last else output
        messages.append(Message(role="tool", content=content, name=call.name))
    return tuple(messages)


def first_messages(
    system_prompt: str, step_line: str, task: TaskInfo, first_step: EnvStep, max_env_steps: int
) -> list[Message]:
    """The system message and the first user message of a function-tool protocol: the task
    (unless the observation already says it), the observation and the step counter."""
    lines = []
    description = task.description.strip()
    if description and description not in first_step.observation:
        lines.append(description)
    lines.append(first_step.observation.strip())
    lines.append(step_line.format(step=0, max_steps=max_env_steps))
    return [
        Message(role="system", content=system_prompt),
        Message(role="user", content="\n\n".join(line for line in lines if line)),
    ]


@dataclass(frozen=True)
class FunctionTools:
    """A `ToolProtocol` whose tools are `FunctionTool`s (see `agentrl.tools.tool`).

    The first user message is the task description (when the observation does not already
    hold it), a step counter and the first observation; each tool message is one call's
    result, the last one of a turn followed by the step counter.
    """

    functions: tuple[FunctionTool, ...]
    system_prompt: str
    max_calls: int = 1
    """The most calls one turn may make (1: exactly one)."""
    step_line: str = "[step {step} of {max_steps}]"
    invalid_text: str = "Error: {detail}. Nothing was run; fix the call and try again."
    dialect: ToolCallDialect = field(default_factory=QwenXmlDialect)
    """The dialect `parse` reads when the rollout does not pass the renderer's."""

    def __post_init__(self) -> None:
        if self.max_calls < 1:
            raise ValueError(f"FunctionTools.max_calls must be >= 1, got {self.max_calls}")
        names = [f.name for f in self.functions]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"FunctionTools needs tools with distinct names, got {names}")

    @property
    def tools(self) -> Sequence[JsonObject]:
        """Every tool's JSON schema (OpenAI function-calling format)."""
        return tuple(f.schema for f in self.functions)

    def function(self, name: str) -> FunctionTool | None:
        """The tool called `name`, if any."""
        return next((f for f in self.functions if f.name == name), None)

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """System message and the first user message (task, step counter, observation)."""
        return first_messages(self.system_prompt, self.step_line, task, first_step, max_env_steps)

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """Read the calls with `dialect` and validate them; never raises."""
        return parse_with_dialect(self, self.dialect, assistant_text, truncated=truncated)

    def check_calls(self, calls: Sequence[ToolCall]) -> ParsedAction:
        """Validate each call against its tool's schema; the first bad one fails the turn."""

        def validator(name: str) -> Callable[[ToolCall], object] | None:
            function = self.function(name)
            return None if function is None else function.validate

        known = [f.name for f in self.functions]
        return check_tool_calls(calls, max_calls=self.max_calls, validator=validator, known=known)

    def tool_messages(self, result: ToolResult) -> tuple[Message, ...]:
        """One message per call (its output), the step counter after the last; one error
        message for an invalid turn."""
        return call_tool_messages(result, step_line=self.step_line, invalid_text=self.invalid_text)

    def tool_message(self, result: ToolResult) -> Message:
        """The turn's first tool message (`tool_messages` has them all)."""
        return self.tool_messages(result)[0]

    def call_text(
        self, call: ToolCall, *calls: ToolCall, dialect: ToolCallDialect | None = None
    ) -> str:
        """The assistant text making these calls in `dialect`'s form (default: `dialect`)."""
        write = dialect or self.dialect
        return "\n".join(write.write(c) for c in (call, *calls))
