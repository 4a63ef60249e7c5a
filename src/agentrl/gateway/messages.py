"""OpenAI chat messages to and from agentrl's: the keys the gateway compares histories by, the
conversion of a request's messages, and the assistant reply of a sampled completion.

A history is compared message by message on `MessageKey`s (role, text, calls with their ids
and JSON arguments, tool-call id): the gateway never re-tokenizes a history to decide whether
it extends the last call; the tokens come from the renderer's exact continuation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentrl.chat import openai_messages as _openai
from agentrl.chat.dialects import ToolCallDialect
from agentrl.chat.openai_messages import MessageKey, OpenAIMessageError, tool_names
from agentrl.core.types import JsonObject, JsonValue, Message, ToolCall
from agentrl.gateway.openai_shapes import GatewayError

__all__ = [
    "AssistantReply",
    "MessageKey",
    "arguments_json",
    "message_key",
    "to_messages",
    "tool_names",
]


def _refused(exc: OpenAIMessageError) -> GatewayError:
    """The gateway's answer to a malformed message: 422 for what it does not take, else 400."""
    status = 422 if exc.code == "unsupported_parameter" else 400
    return GatewayError(status, exc.code, exc.message, exc.param)


def message_key(message: Mapping[str, JsonValue], index: int) -> MessageKey:
    """The comparison key of `messages[index]`; a 400 `GatewayError` for a malformed one."""
    try:
        return _openai.message_key(message, index)
    except OpenAIMessageError as exc:
        raise _refused(exc) from None


def to_messages(
    keys: Sequence[MessageKey],
    dialect: ToolCallDialect,
    sampled: Mapping[MessageKey, str],
) -> list[Message]:
    """agentrl messages of a request (`agentrl.chat.openai_messages.to_messages`); a 400
    `GatewayError` for a tool message that answers no call."""
    try:
        return _openai.to_messages(keys, dialect, sampled)
    except OpenAIMessageError as exc:
        raise _refused(exc) from None


def _string_params(tools: Sequence[JsonObject], name: str) -> set[str] | None:
    """Parameters of tool `name` whose schema type is string (None: the tool is not declared)."""
    for entry in tools:
        function = entry.get("function")
        if isinstance(function, dict) and function.get("name") == name:
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            if not isinstance(properties, dict):
                return set()
            return {
                key
                for key, schema in properties.items()
                if isinstance(schema, dict) and schema.get("type") == "string"
            }
    return None


def arguments_json(call: ToolCall, tools: Sequence[JsonObject]) -> str:
    """A call's arguments as the JSON object text OpenAI clients expect: a parameter the tool
    declares as a string stays the model's text, any other value is decoded as JSON where it
    is JSON (else kept as text)."""
    strings = _string_params(tools, call.name)
    out: dict[str, JsonValue] = {}
    for key, text in call.arguments.items():
        if strings is not None and key in strings:
            out[key] = text
            continue
        try:
            out[key] = json.loads(text)
        except (json.JSONDecodeError, TypeError):
            out[key] = text
    return json.dumps(out, ensure_ascii=False)


@dataclass(frozen=True)
class AssistantReply:
    """The OpenAI assistant message of one sampled completion."""

    content: str | None
    calls: tuple[tuple[str, str, str], ...]
    """(id, name, arguments JSON text) per call."""
    reasoning: str | None = None

    @property
    def key(self) -> MessageKey:
        """The key an agent's copy of this message has."""
        calls = tuple(
            (i, n, json.dumps(json.loads(a), sort_keys=True, ensure_ascii=False))
            for i, n, a in self.calls
        )
        return MessageKey("assistant", self.content or "", calls)

    def message(self) -> JsonObject:
        """`{"role": "assistant", "content": ..., "tool_calls": [...]}`."""
        out: JsonObject = {"role": "assistant", "content": self.content}
        if self.calls:
            out["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in self.calls
            ]
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
        return out
