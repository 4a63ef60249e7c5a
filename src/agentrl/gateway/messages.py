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

from agentrl.chat.dialects import ToolCallDialect
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


@dataclass(frozen=True)
class MessageKey:
    """What makes two OpenAI messages the same message (hashable)."""

    role: str
    text: str
    calls: tuple[tuple[str, str, str], ...] = ()
    """(id, name, canonical JSON of the arguments) per tool call."""
    tool_call_id: str | None = None


def _text(content: JsonValue, where: str) -> str:
    """A message's `content` as text: a string, a list of text parts, or null."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise GatewayError(
                    422,
                    "unsupported_parameter",
                    f"{where}.content[{i}]: only text parts are supported, got {kind!r}",
                    f"{where}.content",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise GatewayError(
                    400, "invalid_value", f"{where}.content[{i}].text must be a string"
                )
            pieces.append(text)
        return "".join(pieces)
    raise GatewayError(400, "invalid_value", f"{where}.content must be a string, a list or null")


def _canonical(arguments: JsonValue, where: str) -> str:
    """Canonical JSON text of a call's `arguments` (a JSON string of an object)."""
    if not isinstance(arguments, str):
        raise GatewayError(
            400, "invalid_value", f"{where}.function.arguments must be a JSON string"
        )
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise GatewayError(
            400, "invalid_value", f"{where}.function.arguments is not JSON ({exc})"
        ) from None
    if not isinstance(value, dict):
        raise GatewayError(400, "invalid_value", f"{where}.function.arguments must be an object")
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def message_key(message: Mapping[str, JsonValue], index: int) -> MessageKey:
    """The comparison key of `messages[index]`; a 400 `GatewayError` for a malformed one."""
    where = f"messages[{index}]"
    role = message.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise GatewayError(
            400, "invalid_value", f"{where}.role must be system, user, assistant or tool"
        )
    calls: list[tuple[str, str, str]] = []
    raw_calls = message.get("tool_calls") or []
    if role == "assistant":
        if not isinstance(raw_calls, list):
            raise GatewayError(400, "invalid_value", f"{where}.tool_calls must be a list")
        for j, call in enumerate(raw_calls):
            spot = f"{where}.tool_calls[{j}]"
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(function, dict) or not isinstance(name, str):
                raise GatewayError(400, "invalid_value", f"{spot}.function.name is missing")
            call_id = call.get("id") if isinstance(call, dict) else None
            calls.append(
                (str(call_id or ""), name, _canonical(function.get("arguments", "{}"), spot))
            )
    tool_call_id = message.get("tool_call_id")
    if role == "tool" and not isinstance(tool_call_id, str):
        raise GatewayError(400, "invalid_value", f"{where}.tool_call_id is missing")
    return MessageKey(
        role=str(role),
        text=_text(message.get("content"), where),
        calls=tuple(calls),
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) else None,
    )


def tool_names(keys: Sequence[MessageKey]) -> dict[str, str]:
    """Tool name of each call id in the assistant messages of `keys`."""
    return {call_id: name for key in keys for call_id, name, _ in key.calls if call_id}


def _call(name: str, canonical: str) -> ToolCall:
    """A `ToolCall` of JSON arguments (strings verbatim, other values as JSON text)."""
    values = json.loads(canonical)
    arguments = {
        k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in values.items()
    }
    return ToolCall(name=name, arguments=arguments)


def to_messages(
    keys: Sequence[MessageKey],
    dialect: ToolCallDialect,
    sampled: Mapping[MessageKey, str],
) -> list[Message]:
    """agentrl messages of a request: an assistant message the gateway sampled keeps its exact
    text (`sampled`), another is written in the family's dialect; a tool message is named by
    the call it answers."""
    names = tool_names(keys)
    out: list[Message] = []
    for index, key in enumerate(keys):
        if key.role == "assistant":
            text = sampled.get(key)
            if text is None:
                written = [dialect.write(_call(name, args)) for _, name, args in key.calls]
                text = "\n".join([key.text, *written] if key.text else written)
            out.append(Message(role="assistant", content=text))
        elif key.role == "tool":
            name = names.get(key.tool_call_id or "")
            if name is None:
                raise GatewayError(
                    400,
                    "invalid_value",
                    f"messages[{index}].tool_call_id {key.tool_call_id!r} answers no call of an "
                    "earlier assistant message",
                    f"messages[{index}].tool_call_id",
                )
            out.append(Message(role="tool", content=key.text, name=name))
        else:
            out.append(Message(role=key.role, content=key.text))  # type: ignore[arg-type]
    return out


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
