"""gpt-oss Harmony calls: a commentary-channel message addressed to `functions.NAME`.

After the generation prompt `<|start|>assistant` a gpt-oss model writes messages such as

    <|channel|>analysis<|message|>I should look around.<|end|><|start|>assistant
    <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{"k": "v"}<|call|>

(no line breaks). `<|call|>` ends a call and `<|return|>` a final answer; both stop sampling
(`<|end|>` only ends one message). The analysis channel is the reasoning; a call is a message
whose header names a `to=functions.NAME` recipient (before or after the channel, as the
template renders it). Final-channel text before the call is content.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from agentrl.chat.dialects.base import (
    Extracted,
    ToolCallDialect,
    json_arguments,
)
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["HarmonyDialect"]

START, MESSAGE, CHANNEL = "<|start|>assistant", "<|message|>", "<|channel|>"
_SPLIT = re.compile(r"<\|start\|>assistant|<\|end\|>|<\|call\|>|<\|return\|>")
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>(\w+)")


def _messages(text: str) -> list[tuple[str, str]] | ParseError:
    """(header, body) of every message in `text` (a new `<|channel|>` after a body also starts
    one, so a model that omits `<|end|><|start|>assistant` between messages is still read)."""
    out: list[tuple[str, str]] = []
    for raw in _SPLIT.split(text):
        pending = ""
        for piece in re.split(r"(?=<\|channel\|>)", raw):
            pending += piece
            if MESSAGE in pending:
                header, body = pending.split(MESSAGE, 1)
                out.append((header, body))
                pending = ""
        if CHANNEL in pending or "to=functions." in pending:  # a header cut before its body
            return ParseError(ParseErrorKind.MALFORMED, f"a message header without {MESSAGE}")
        if pending.strip():  # plain text without any header: read as final text
            out.append(("", pending))
    return out


class HarmonyDialect(ToolCallDialect):
    """gpt-oss (Harmony): `<|channel|>commentary to=functions.NAME ...<|message|>JSON<|call|>`."""

    name = "harmony"
    families = "gpt-oss-20b, gpt-oss-120b"
    stop_markers = ("<|call|>", "<|return|>")
    signature = ("<|channel|>", "<|call|>")
    reserved: ClassVar[tuple[str, ...]] = (
        START,
        MESSAGE,
        CHANNEL,
        "<|end|>",
        "<|call|>",
        "<|return|>",
        "<|constrain|>",
        "to=",
        " ",
        "\n",
        "\t",
    )
    think = None
    reasoning_key = "thinking"

    def write(self, call: ToolCall) -> str:
        """A commentary message to `functions.NAME` with JSON arguments (without `<|call|>`)."""
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        return f"{CHANNEL}commentary to=functions.{call.name} <|constrain|>json{MESSAGE}{arguments}"

    def reasoning_reply(self, reasoning: str, answer: str, *, opened: bool) -> str:
        """An analysis message, then the answer as the next message."""
        return f"{CHANNEL}analysis{MESSAGE}{reasoning}<|end|>{START}{answer}"

    def split_reasoning(self, text: str) -> tuple[str | None, str] | ParseError:
        """Analysis-channel messages are the reasoning; the other messages are the rest."""
        messages = _messages(text)
        if isinstance(messages, ParseError):
            return messages
        reasoning = [body for header, body in messages if _channel(header) == "analysis"]
        rest = [f"{h}{MESSAGE}{b}" for h, b in messages if _channel(h) != "analysis"]
        return ("\n".join(reasoning) if reasoning else None), START.join(rest)

    def extract(self, body: str) -> Extracted | ParseError:
        """Messages with a `functions.` recipient are calls; final text before them is content."""
        messages = _messages(body)
        if isinstance(messages, ParseError):
            return messages
        calls: list[ToolCall] = []
        content: list[str] = []
        trailing: list[str] = []
        for header, text in messages:
            recipient = _RECIPIENT.search(header)
            if recipient is None:
                (trailing if calls else content).append(text)
                continue
            parsed = json_arguments(text)
            if isinstance(parsed, ParseError):
                return parsed
            calls.append(ToolCall(name=recipient.group(1), arguments=parsed))
        return Extracted(
            calls=tuple(calls), content="\n".join(content).strip(), trailing="\n".join(trailing)
        )


def _channel(header: str) -> str | None:
    match = _CHANNEL.search(header)
    return match.group(1) if match else None
