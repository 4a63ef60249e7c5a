"""How a chat template treats history: extension modes, safe rewrites, segment re-renders.

A template *extends* when every prompt is a text prefix of the next render. Qwen3's template
does not: it drops the (empty) think blocks of earlier assistant turns. That rewrite is *safe*
(the prompts keep exactly the tokens that were sampled; a fresh render differs only by the
absence of those blocks), so it is accepted with a one-time warning and recorded. Templates that
render an assistant turn differently from their own generation prompt (gpt-oss: the reply's
channels are re-rendered) cannot be extended at all: the rollout re-renders the conversation
each turn and starts a new training *segment*.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentrl.chat.dialects import ToolCallDialect
from agentrl.core.types import JsonValue, Message

__all__ = [
    "ExtensionMode",
    "RenderRecord",
    "drop_think_blocks",
    "first_difference",
    "structured_messages",
    "warn_once",
]

log = logging.getLogger("agentrl.chat")
_WARNED: set[str] = set()


class ExtensionMode(StrEnum):
    """How the rollout grows prompts with a template."""

    EXTENDS = "extends"
    """Every prompt is a token prefix of the next render."""
    SAFE_REWRITE = "safe_rewrite"
    """Prompts are extended; a fresh render differs only by dropped think blocks."""
    REWRITE_ALLOWED = "rewrite_allowed"
    """Prompts are extended although the template rewrites history (allow_history_rewrite)."""
    SEGMENTS = "segments"
    """The conversation is re-rendered every turn; each turn starts a new training segment."""


@dataclass(frozen=True)
class RenderRecord:
    """What a renderer decided about its template (written to run.json and eval run records)."""

    dialect: str
    extension: ExtensionMode
    enable_thinking: bool
    stop_markers: tuple[str, ...]
    rewrite: str | None = None
    """The template's history rewrite that was accepted, when there is one."""

    def as_json(self) -> dict[str, JsonValue]:
        """A JSON object of the record."""
        return {
            "dialect": self.dialect,
            "extension": self.extension.value,
            "enable_thinking": self.enable_thinking,
            "stop_markers": list(self.stop_markers),
            "rewrite": self.rewrite,
        }


def first_difference(a: str, b: str, context: int = 30) -> str:
    """Where `b` stops being `a`, quoted with `context` characters around the first differing
    character on both sides."""
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo, hi = max(0, i - context), i + context
    return f"at character {i}: {a[lo:hi]!r} became {b[lo:hi]!r}"


def drop_think_blocks(text: str, dialect: ToolCallDialect) -> str:
    """`text` without any reasoning block of the dialect (and the blank lines after it)."""
    if dialect.think is None:
        return text
    start, end = (re.escape(m) for m in dialect.think)
    return re.sub(f"{start}.*?{end}\\s*", "", text, flags=re.DOTALL)


def warn_once(key: str, message: str) -> None:
    """Log `message` as a warning the first time `key` is seen in this process."""
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning(message)


_SPECIAL = re.compile(r"<\|[A-Za-z_]+\|>")


def structured_messages(
    messages: Sequence[Message], dialect: ToolCallDialect
) -> list[dict[str, Any]]:
    """Messages as a template's own inputs, for a segment re-render.

    Each assistant reply is parsed back by the dialect: its calls become `tool_calls`, its
    reasoning the family's reasoning field and the rest `content`. A tool message after a reply
    without a call (an invalid turn) is rendered as a user message, since some templates
    (gpt-oss) refuse a tool result no call asked for.
    """
    out: list[dict[str, Any]] = []
    called = False
    for message in messages:
        if message.role == "assistant":
            parsed = dialect.parse(message.content, max_calls=None)
            entry: dict[str, Any] = {"role": "assistant"}
            content = parsed.content if parsed.ok else _SPECIAL.sub("", message.content).strip()
            if parsed.reasoning:
                entry[dialect.reasoning_key] = parsed.reasoning
                content = "" if parsed.calls and dialect.reasoning_key == "thinking" else content
            entry["content"] = content
            called = bool(parsed.calls)
            if parsed.calls:
                entry["tool_calls"] = [
                    {
                        "type": "function",
                        "function": {"name": c.name, "arguments": dict(c.arguments)},
                    }
                    for c in parsed.calls
                ]
            out.append(entry)
        elif message.role == "tool" and not called:
            out.append({"role": "user", "content": message.content})
        else:
            entry = {"role": message.role, "content": message.content}
            if message.name is not None:
                entry["name"] = message.name
            out.append(entry)
    return out
