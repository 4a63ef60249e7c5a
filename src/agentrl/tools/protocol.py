"""Tool protocol contract: how an environment is exposed to the model as tools.

A `ToolProtocol` owns everything textual about acting through a tool: the tools' JSON
schemas, the system prompt, the first user message, parsing an assistant message into an
action (never raising: a bad call is a typed `ParseError`), and the tool message that answers
each call. Implementations: `agentrl.tools.CommandTool` (one text command: ALFWorld's
`alfworld_step`, the toy environment).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentrl.chat.dialects.base import ToolCallDialect
from agentrl.core.types import (
    EnvStep,
    JsonObject,
    Message,
    ParsedAction,
    TaskInfo,
    ToolCall,
    TurnStatus,
)

__all__ = [
    "CallChecker",
    "CallsChecker",
    "ToolProtocol",
    "ToolResult",
    "parse_with_dialect",
    "tool_messages",
]


@dataclass(frozen=True)
class ToolResult:
    """What the tool message of one turn must tell the model."""

    status: TurnStatus
    step: EnvStep
    """The environment state after the turn (unchanged when the call was invalid)."""
    parsed: ParsedAction
    env_steps: int
    """Environment steps taken so far in this episode."""
    max_env_steps: int
    task: TaskInfo | None = None
    """The episode's task (the rollout engine sets it; a protocol may restate it)."""


@runtime_checkable
class ToolProtocol(Protocol):
    """The textual interface between a model and an environment."""

    @property
    def tools(self) -> Sequence[JsonObject]:
        """JSON schemas of the tools (OpenAI function-calling format)."""
        ...

    @property
    def system_prompt(self) -> str:
        """The system message text."""
        ...

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """System and first user message for a fresh episode."""
        ...

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """Parse an assistant message into an action or a typed error; never raises.

        `truncated` is True when the sampler stopped at its token limit.
        """
        ...

    def tool_message(self, result: ToolResult) -> Message:
        """The tool message answering one call."""
        ...


@runtime_checkable
class CallChecker(Protocol):
    """A protocol that can check a call a model family's dialect has already read."""

    def check_call(self, call: ToolCall) -> ParsedAction:
        """The action of a parsed call, or a typed error; never raises."""
        ...


@runtime_checkable
class CallsChecker(Protocol):
    """A protocol whose turns make up to `max_calls` calls, each answered by its own message."""

    @property
    def max_calls(self) -> int:
        """The most calls one turn may make (1: exactly one call)."""
        ...

    def check_calls(self, calls: Sequence[ToolCall]) -> ParsedAction:
        """The turn's validated calls (`ParsedAction.calls`), or a typed error; never raises."""
        ...

    def tool_messages(self, result: ToolResult) -> tuple[Message, ...]:
        """The tool messages answering the turn: one per call, in order (one for an error)."""
        ...


def tool_messages(protocol: ToolProtocol, result: ToolResult) -> tuple[Message, ...]:
    """The messages answering one turn: the protocol's `tool_messages`, else its one message."""
    if isinstance(protocol, CallsChecker):
        return protocol.tool_messages(result)
    return (protocol.tool_message(result),)


def _tool_names(protocol: ToolProtocol) -> set[str]:
    names: set[str] = set()
    for schema in protocol.tools:
        function = schema.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(str(function["name"]))
    return names


def parse_with_dialect(
    protocol: ToolProtocol, dialect: ToolCallDialect, text: str, *, truncated: bool = False
) -> ParsedAction:
    """Read the turn's calls with the model family's dialect, then check them with the protocol.

    A `CallsChecker` (function tools) gets up to its `max_calls` calls; a `CallChecker`
    (`CommandTool`) exactly one; other protocols parse the text themselves (`protocol.parse`).
    """
    names = _tool_names(protocol) or None
    if isinstance(protocol, CallsChecker):
        read = dialect.parse(text, tools=names, max_calls=protocol.max_calls, truncated=truncated)
        if read.error is not None:
            return ParsedAction(action=None, error=read.error)
        return protocol.check_calls(read.calls)
    if not isinstance(protocol, CallChecker):
        return protocol.parse(text, truncated=truncated)
    parsed = dialect.parse(text, tools=names, truncated=truncated)
    if parsed.error is not None:
        return ParsedAction(action=None, error=parsed.error)
    return protocol.check_call(parsed.calls[0])
