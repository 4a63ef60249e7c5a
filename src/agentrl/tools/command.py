"""`CommandTool`: the one-text-command special case of a tool protocol (ALFWorld, toy), and
`PlainCommandProtocol`: the same commands with no tool markup at all, for small models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentrl.chat.dialects.base import ToolCallDialect
from agentrl.chat.tool_calls import (
    check_command_call,
    json_tool_call,
    parse_tool_call,
    xml_tool_call,
)
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
from agentrl.tools.protocol import ToolResult

__all__ = ["CommandTool", "PlainCommandProtocol", "StatusTexts"]


@dataclass(frozen=True)
class StatusTexts:
    """The first line of a tool message for each `TurnStatus` (`{action}`/`{detail}` filled in)."""

    won: str = "Status: won. The task is complete."
    ended: str = "Status: the episode ended without success."
    invalid_format: str = (
        "Status: invalid tool-call format ({detail}). The environment state was not advanced."
    )
    not_admissible: str = (
        "Status: action not admissible: {action!r} cannot be executed here; nothing happened."
    )
    executed: str = "Status: executed {action!r}."

    def line(self, status: TurnStatus, action: str | None, detail: str) -> str:
        """The status line of one turn."""
        template = {
            TurnStatus.WON: self.won,
            TurnStatus.ENDED: self.ended,
            TurnStatus.INVALID_FORMAT: self.invalid_format,
            TurnStatus.NOT_ADMISSIBLE: self.not_admissible,
            TurnStatus.EXECUTED: self.executed,
        }[status]
        return template.format(action=action or "", detail=detail)


@dataclass(frozen=True)
class CommandTool:
    """A `ToolProtocol` with one tool that takes one text command (`tool(parameter: str)`).

    The texts are fields, so one class serves ALFWorld (`alfworld_step(action)`), the toy
    environment and user environments. The first user message and every tool message carry a
    step counter, the observation and, when `include_admissible`, the executable commands
    (minus `hidden_actions`), one per line.
    """

    name: str
    description: str
    system_prompt: str
    parameter: str = "action"
    parameter_description: str = "One command, copied exactly from the available actions."
    include_admissible: bool = True
    hidden_actions: frozenset[str] = frozenset({"help"})
    actions_heading: str = "Available actions (copy one exactly):"
    status: StatusTexts = field(default_factory=StatusTexts)

    @property
    def tools(self) -> Sequence[JsonObject]:
        """The tool's JSON schema (OpenAI function-calling format)."""
        schema: JsonObject = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        self.parameter: {
                            "type": "string",
                            "description": self.parameter_description,
                        }
                    },
                    "required": [self.parameter],
                    "additionalProperties": False,
                },
            },
        }
        return (schema,)

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """System message and the first user message (task, step 0, observation, actions)."""
        lines = []
        description = task.description.strip()
        if description and description not in first_step.observation:
            lines.append(f"Task: {description}")
        lines.append(f"Step 0 of {max_env_steps}.")
        lines.append(f"Observation:\n{first_step.observation.strip()}")
        lines.extend(self._actions(first_step))
        return [
            Message(role="system", content=self.system_prompt),
            Message(role="user", content="\n".join(lines)),
        ]

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """Parse one call of this tool (XML or JSON form); never raises."""
        return parse_tool_call(
            assistant_text, tool_name=self.name, parameter=self.parameter, truncated=truncated
        )

    def check_call(self, call: ToolCall) -> ParsedAction:
        """Check a call a dialect has read (tool name, the one argument); never raises."""
        return check_command_call(call, tool_name=self.name, parameter=self.parameter)

    def tool_message(self, result: ToolResult) -> Message:
        """Status line, step counter, observation and (optionally) the available actions."""
        detail = result.parsed.error.detail if result.parsed.error is not None else ""
        lines = [self.status.line(result.status, result.parsed.action, detail)]
        lines.append(f"Step {result.env_steps} of {result.max_env_steps}.")
        if result.status is not TurnStatus.INVALID_FORMAT:
            lines.append(f"Observation:\n{result.step.observation.strip()}")
        if result.status in (TurnStatus.WON, TurnStatus.ENDED):
            return Message(role="tool", content="\n".join(lines), name=self.name)
        lines.extend(self._actions(result.step))
        return Message(role="tool", content="\n".join(lines), name=self.name)

    def call_text(
        self, action: str, *, style: str = "xml", dialect: ToolCallDialect | None = None
    ) -> str:
        """The assistant text that calls this tool with `action`: in `dialect`'s form when
        given (a model family's), else Qwen's (`style` "xml" or "json")."""
        if dialect is not None:
            return dialect.write(ToolCall(name=self.name, arguments={self.parameter: action}))
        if style == "xml":
            return xml_tool_call(self.name, {self.parameter: action})
        if style == "json":
            return json_tool_call(self.name, {self.parameter: action})
        raise ValueError(f"style must be 'xml' or 'json', got {style!r}")

    def _actions(self, step: EnvStep) -> list[str]:
        if not self.include_admissible:
            return []
        shown = [a for a in step.admissible_actions if a not in self.hidden_actions]
        return [self.actions_heading, *shown] if shown else []


@dataclass(frozen=True)
class PlainCommandProtocol:
    """A `ToolProtocol` for small models: the reply is one command, verbatim, no tool markup.

    A from-scratch model learns this format from a few hundred demonstrations (a tool call's
    markup takes far more). Every message lists the executable commands (the env's
    `EnvStep.admissible_actions`: a text env's, or a `FunctionEnv`'s `admissible_actions()`)
    *before* the observation, so the newest text sits next to the reply: the first user message
    is the task (when the observation does not hold it), the step counter, the actions and the
    observation; each tool message the status line, the step counter, the actions (unless the
    episode ended) and the observation (unless the reply was unreadable).
    """

    system_prompt: str = "Reply with the one command, copied from the actions, that does the task."
    actions_heading: str = "Available actions (copy one exactly):"
    status: StatusTexts = field(default_factory=StatusTexts)
    name: str | None = None
    """The name tool messages carry (None: no name)."""
    include_admissible: bool = True
    """List the executable commands in every message (False: the model must write them)."""
    show_steps: bool = True
    """Carry the `Step N of M.` counter in every message."""
    restate_task: bool = False
    """Repeat the task (`Task: <TaskInfo.description>`) in every tool message before the
    observation, as verl-agent's ALFWorld prompt does: the goal then sits a few tokens from
    each reply instead of at the start of the episode."""
    unlisted_prefixes: tuple[str, ...] = ()
    """Commands starting with one of these are left out of the lists (ALFWorld's `"go to "`:
    the receptacles are named in the first observation and do not change, so the lists show
    only the commands that act where the agent stands: about a third fewer tokens an
    episode). The commands stay executable; a list left empty is not shown."""

    @property
    def tools(self) -> Sequence[JsonObject]:
        """No tools: the reply is the command."""
        return ()

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """System message; the task (if not in the observation), step 0, actions, observation."""
        lines = []
        description = task.description.strip()
        if description and description not in first_step.observation:
            lines.append(f"Task: {description}")
        if self.show_steps:
            lines.append(f"Step 0 of {max_env_steps}.")
        lines.extend(self._listed(first_step))
        lines.append(f"Observation:\n{first_step.observation.strip()}")
        return [
            Message(role="system", content=self.system_prompt),
            Message(role="user", content="\n".join(lines)),
        ]

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """The whole reply is the command (lower case, single spaces); a cut, empty or
        multi-line reply is invalid. Never raises."""
        if truncated:
            return ParsedAction.failure(ParseErrorKind.TRUNCATED, "reply cut at the limit")
        text = " ".join(assistant_text.split()).lower()
        if not text:
            return ParsedAction.failure(ParseErrorKind.EMPTY_ACTION, "empty reply")
        if "\n" in assistant_text.strip():
            return ParsedAction.failure(ParseErrorKind.MULTILINE_ACTION, "several lines")
        return ParsedAction(action=text)

    def tool_message(self, result: ToolResult) -> Message:
        """Status line (left out when its text is empty), step counter, actions and (with
        `restate_task`) the task unless finished, then the observation."""
        detail = result.parsed.error.detail if result.parsed.error is not None else ""
        status = self.status.line(result.status, result.parsed.action, detail)
        lines = [status] if status else []
        if self.show_steps:
            lines.append(f"Step {result.env_steps} of {result.max_env_steps}.")
        if result.status not in (TurnStatus.WON, TurnStatus.ENDED):
            lines.extend(self._listed(result.step))
            description = result.task.description.strip() if result.task else ""
            if self.restate_task and description:
                lines.append(f"Task: {description}")
        if result.status is not TurnStatus.INVALID_FORMAT:
            lines.append(f"Observation:\n{result.step.observation.strip()}")
        return Message(role="tool", content="\n".join(lines), name=self.name)

    def call_text(self, action: str, *, dialect: ToolCallDialect | None = None) -> str:
        """The assistant text that sends `action`: the command itself (no markup, so every
        `dialect` writes it the same; the argument makes this protocol a drop-in for
        `CommandTool.call_text` callers such as the planner player)."""
        del dialect
        return action

    def _listed(self, step: EnvStep) -> list[str]:
        if not self.include_admissible:
            return []
        # `str.startswith(())` is False: with no prefixes every command is listed
        actions = [a for a in step.admissible_actions if not a.startswith(self.unlisted_prefixes)]
        return [self.actions_heading, *actions] if actions else []
