"""Tool protocol contract: how an environment is exposed to the model as tools.

A `ToolProtocol` owns everything textual about acting through a tool: the tools' JSON
schemas, the system prompt, the first user message, parsing an assistant message into an
action (never raising: a bad call is a typed `ParseError`), and the tool message that answers
each call. Implementations: `agentrl.envs.alfworld` (the `alfworld_step` tool) and
`agentrl.envs.toy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentrl.types import EnvStep, JsonObject, Message, ParsedAction, TaskInfo, TurnStatus

__all__ = ["ToolProtocol", "ToolResult"]


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
