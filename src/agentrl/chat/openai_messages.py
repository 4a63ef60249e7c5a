"""OpenAI chat messages (the `messages` of a chat-completions request, or of a JSONL line of
conversations) as agentrl's: each message checked field by field, assistant tool calls written
in the model family's dialect (the text a model of that family emits), tool messages named by
the call they answer. The gateway compares histories by `MessageKey`s; supervised fine-tuning
reads conversations with `conversation_messages`. A malformed message raises
`OpenAIMessageError` naming the field (`messages[2].tool_calls[0].function.arguments`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentrl.chat.dialects import ToolCallDialect
from agentrl.core.types import JsonValue, Message, ToolCall

__all__ = [
    "MessageKey",
    "OpenAIMessageError",
    "conversation_messages",
    "message_key",
    "to_messages",
    "tool_names",
]


class OpenAIMessageError(ValueError):
    """A malformed OpenAI message: `code` (invalid_value, or unsupported_parameter for what
    agentrl does not take, e.g. image parts), the message naming the field, `param`."""

    def __init__(
        self,
        code: Literal["invalid_value", "unsupported_parameter"],
        message: str,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code: Literal["invalid_value", "unsupported_parameter"] = code
        self.message = message
        self.param = param


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
                raise OpenAIMessageError(
                    "unsupported_parameter",
                    f"{where}.content[{i}]: only text parts are supported, got {kind!r}",
                    f"{where}.content",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise OpenAIMessageError(
                    "invalid_value", f"{where}.content[{i}].text must be a string"
                )
            pieces.append(text)
        return "".join(pieces)
    raise OpenAIMessageError("invalid_value", f"{where}.content must be a string, a list or null")


def _canonical(arguments: JsonValue, where: str) -> str:
    """Canonical JSON text of a call's `arguments` (a JSON string of an object)."""
    if not isinstance(arguments, str):
        raise OpenAIMessageError(
            "invalid_value", f"{where}.function.arguments must be a JSON string"
        )
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise OpenAIMessageError(
            "invalid_value", f"{where}.function.arguments is not JSON ({exc})"
        ) from None
    if not isinstance(value, dict):
        raise OpenAIMessageError("invalid_value", f"{where}.function.arguments must be an object")
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def message_key(message: Mapping[str, JsonValue], index: int) -> MessageKey:
    """The comparison key of `messages[index]`; a malformed one raises `OpenAIMessageError`
    naming the field."""
    where = f"messages[{index}]"
    role = message.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise OpenAIMessageError(
            "invalid_value", f"{where}.role must be system, user, assistant or tool"
        )
    calls: list[tuple[str, str, str]] = []
    raw_calls = message.get("tool_calls") or []
    if role == "assistant":
        if not isinstance(raw_calls, list):
            raise OpenAIMessageError("invalid_value", f"{where}.tool_calls must be a list")
        for j, call in enumerate(raw_calls):
            spot = f"{where}.tool_calls[{j}]"
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(function, dict) or not isinstance(name, str):
                raise OpenAIMessageError("invalid_value", f"{spot}.function.name is missing")
            call_id = call.get("id") if isinstance(call, dict) else None
            calls.append(
                (str(call_id or ""), name, _canonical(function.get("arguments", "{}"), spot))
            )
    tool_call_id = message.get("tool_call_id")
    if role == "tool" and not isinstance(tool_call_id, str):
        raise OpenAIMessageError("invalid_value", f"{where}.tool_call_id is missing")
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
                raise OpenAIMessageError(
                    "invalid_value",
                    f"messages[{index}].tool_call_id {key.tool_call_id!r} answers no call of an "
                    "earlier assistant message",
                    f"messages[{index}].tool_call_id",
                )
            out.append(Message(role="tool", content=key.text, name=name))
        else:
            out.append(Message(role=key.role, content=key.text))  # type: ignore[arg-type]
    return out


def conversation_messages(
    messages: Sequence[Mapping[str, JsonValue]], dialect: ToolCallDialect
) -> list[Message]:
    """agentrl messages of a conversation of OpenAI messages; every assistant message is
    written in `dialect` (its text, then its calls)."""
    keys = [message_key(m, i) for i, m in enumerate(messages)]
    return to_messages(keys, dialect, {})
