"""Prompts as tokens: the chat renderer and the model families' tool-call dialects."""

from agentrl.chat.renderer import (
    ChatRenderer,
    ChatTemplateError,
    ChatTokenizer,
    HistoryRewriteError,
    message_to_dict,
)

__all__ = [
    "ChatRenderer",
    "ChatTemplateError",
    "ChatTokenizer",
    "HistoryRewriteError",
    "message_to_dict",
]
