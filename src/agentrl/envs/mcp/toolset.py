"""`McpTools`: the tool protocol of an MCP env: one server's tools and the env's local `@tool`s.

The protocol is known before any rollout (the chat renderer shows the tools' schemas), so it is
built once with `await McpTools.connect(server, system_prompt=...)`, which opens a session,
lists the server's tools and closes it again (or with `McpEnv.connect`, which adds the env's
local tools). A turn makes one call (`max_calls=1`) or up to `max_calls`, each checked here
before anything runs: an unknown tool or arguments that do not match the tool's schema make
the turn invalid with the schema's own message (as `agentrl.tools.FunctionTools` does).
Texts follow `FunctionTools`: the first user message is the task and the first observation,
each tool message one call's output, the last one of a turn followed by the step counter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentrl.chat.dialects.base import ToolCallDialect
from agentrl.chat.dialects.qwen import QwenXmlDialect
from agentrl.core.types import (
    EnvStep,
    JsonObject,
    JsonValue,
    Message,
    ParsedAction,
    TaskInfo,
    ToolCall,
)
from agentrl.envs.mcp.config import McpServer
from agentrl.envs.mcp.schema import McpTool
from agentrl.envs.mcp.session import McpSession
from agentrl.tools import FunctionTool, ToolArgumentError, ToolResult, parse_with_dialect
from agentrl.tools.toolset import call_tool_messages, check_tool_calls, first_messages

__all__ = ["McpTools"]


@dataclass(frozen=True)
class McpTools:
    """A `ToolProtocol` (and `CallsChecker`) over an MCP server's tools plus local tools."""

    server: McpServer
    remote: tuple[McpTool, ...]
    """The server's tools the model may call (listed once, by `connect`)."""
    system_prompt: str
    local: tuple[FunctionTool, ...] = ()
    """Tools the env runs itself (`@tool` methods of an `McpEnv`, e.g. `submit`)."""
    max_calls: int = 1
    """The most calls one turn may make (1: exactly one)."""
    instructions: str | None = None
    """The server's instructions text, when it sent one (not added to the prompt by itself)."""
    output_chars: int = 8000
    """Characters of one call's output a tool message keeps (the rest is cut, and said so)."""
    forbid_unknown_arguments: bool = True
    """Reject an argument the tool's schema does not name (unless it allows extra ones)."""
    step_line: str = "[step {step} of {max_steps}]"
    invalid_text: str = "Error: {detail}. Nothing was run; fix the call and try again."
    dialect: ToolCallDialect = field(default_factory=QwenXmlDialect)
    """The dialect `parse` reads when the rollout does not pass the renderer's."""

    def __post_init__(self) -> None:
        if self.max_calls < 1:
            raise ValueError(f"McpTools.max_calls must be >= 1, got {self.max_calls}")
        if self.output_chars < 1:
            raise ValueError(f"McpTools.output_chars must be >= 1, got {self.output_chars}")
        names = [t.name for t in self.remote] + [f.name for f in self.local]
        if not names:
            raise ValueError(f"McpTools: server {self.server.describe()} lists no tools")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"McpTools: tool names must be distinct; {twice} named twice (a local tool "
                "with a server tool's name? leave the server's out with `include=`)"
            )

    @classmethod
    async def connect(
        cls,
        server: McpServer,
        *,
        system_prompt: str,
        local: Sequence[FunctionTool] = (),
        include: Sequence[str] | None = None,
        max_calls: int = 1,
        output_chars: int = 8000,
        forbid_unknown_arguments: bool = True,
    ) -> McpTools:
        """List the server's tools once (a short session) and build the protocol.

        `include` keeps only the named server tools (in that order); `local` adds tools the env
        runs itself. Raises `McpStartError` when the server does not start, ValueError when a
        tool's schema is invalid or an included tool is missing."""
        session = await McpSession.open(server)
        try:
            listed, instructions = session.tools, session.instructions
        finally:
            await session.close()
        if include is not None:
            by_name = {t.name: t for t in listed}
            missing = [name for name in include if name not in by_name]
            if missing:
                known = ", ".join(by_name) or "none"
                raise ValueError(
                    f"MCP server {server.describe()} has no tool {missing}; it lists: {known}"
                )
            listed = tuple(by_name[name] for name in include)
        for remote in listed:
            try:
                remote.check_schema()
            except ValueError as exc:
                raise ValueError(f"MCP server {server.describe()}: {exc}") from None
        return cls(
            server=server,
            remote=listed,
            system_prompt=system_prompt,
            local=tuple(local),
            max_calls=max_calls,
            instructions=instructions,
            output_chars=output_chars,
            forbid_unknown_arguments=forbid_unknown_arguments,
        )

    @property
    def tools(self) -> Sequence[JsonObject]:
        """Every tool's OpenAI-style function schema: the server's, then the local ones."""
        return tuple(t.schema for t in self.remote) + tuple(f.schema for f in self.local)

    def remote_tool(self, name: str) -> McpTool | None:
        """The server tool called `name`, if any."""
        return next((t for t in self.remote if t.name == name), None)

    def local_tool(self, name: str) -> FunctionTool | None:
        """The local tool called `name`, if any."""
        return next((f for f in self.local if f.name == name), None)

    def arguments(self, call: ToolCall) -> dict[str, JsonValue]:
        """A server call's arguments, decoded and validated; raises `ToolArgumentError`."""
        remote = self.remote_tool(call.name)
        if remote is None:
            raise ToolArgumentError(f"{call.name!r} is not a tool of the server")
        return remote.arguments(call, forbid_unknown=self.forbid_unknown_arguments)

    def _check(self, call: ToolCall) -> None:
        local = self.local_tool(call.name)
        if local is not None:
            local.validate(call)
        else:
            self.arguments(call)

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """System message and the first user message (task, observation, step counter)."""
        return first_messages(self.system_prompt, self.step_line, task, first_step, max_env_steps)

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """Read the calls with `dialect` and validate them; never raises."""
        return parse_with_dialect(self, self.dialect, assistant_text, truncated=truncated)

    def check_calls(self, calls: Sequence[ToolCall]) -> ParsedAction:
        """Validate each call against its tool's schema; the first bad one fails the turn."""

        def validator(name: str) -> Callable[[ToolCall], object] | None:
            known = self.remote_tool(name) is not None or self.local_tool(name) is not None
            return self._check if known else None

        known = [*(t.name for t in self.remote), *(f.name for f in self.local)]
        return check_tool_calls(calls, max_calls=self.max_calls, validator=validator, known=known)

    def tool_messages(self, result: ToolResult) -> tuple[Message, ...]:
        """One message per call (its output), the step counter after the last; one error
        message for an invalid turn."""
        return call_tool_messages(result, step_line=self.step_line, invalid_text=self.invalid_text)

    def tool_message(self, result: ToolResult) -> Message:
        """The turn's first tool message (`tool_messages` has them all)."""
        return self.tool_messages(result)[0]

    def call(self, name: str, **arguments: JsonValue) -> ToolCall:
        """A `ToolCall` of tool `name` (each argument as the text a model would write)."""
        texts = {
            k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in arguments.items()
        }
        return ToolCall(name=name, arguments=texts)

    def call_text(
        self, call: ToolCall, *calls: ToolCall, dialect: ToolCallDialect | None = None
    ) -> str:
        """The assistant text making these calls in `dialect`'s form (default: `dialect`)."""
        write = dialect or self.dialect
        return "\n".join(write.write(c) for c in (call, *calls))
