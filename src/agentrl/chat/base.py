"""The renderer's vocabulary: the tokenizer it needs, its errors, messages as template dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agentrl.core.types import Message

__all__ = ["ChatTemplateError", "ChatTokenizer", "HistoryRewriteError", "message_to_dict"]


class ChatTokenizer(Protocol):
    """The part of a Hugging Face tokenizer the renderer uses."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        """Render messages with the tokenizer's chat template."""
        ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Text to token ids."""
        ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str:
        """Token ids to text."""
        ...


class ChatTemplateError(ValueError):
    """The chat template cannot be extended token by token."""


class HistoryRewriteError(ChatTemplateError):
    """The chat template renders earlier turns differently once more messages follow."""


def message_to_dict(message: Message) -> dict[str, Any]:
    """A `Message` in the dict form Hugging Face chat templates expect."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": dict(c.arguments)}}
            for c in message.tool_calls
        ]
    if message.name is not None:
        out["name"] = message.name
    return out
