"""GLM-4.5 / 4.6 calls: the tool name, then `<arg_key>` / `<arg_value>` pairs.

    <tool_call>NAME
    <arg_key>action</arg_key>
    <arg_value>go to desk 1</arg_value>
    </tool_call>

The assistant turn has no closing token: the model ends it with `<|observation|>` (a tool
result follows) or `<|user|>`, which are therefore stop tokens. Reasoning is `<think>...</think>`.
"""

from __future__ import annotations

import re
from typing import ClassVar

from agentrl.chat.dialects.base import Extracted, ToolCallDialect, extract_blocks, quote
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["GlmDialect"]

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_PAIR = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


class GlmDialect(ToolCallDialect):
    """GLM-4.5 / 4.6: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`."""

    name = "glm4"
    families = "GLM-4.5, GLM-4.6"
    stop_markers = ("<|observation|>", "<|user|>", "<|endoftext|>")
    signature = ("<arg_key>", "<arg_value>")
    reserved: ClassVar[tuple[str, ...]] = (
        OPEN,
        CLOSE,
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "<think>",
        "</think>",
        "<|observation|>",
        "<|user|>",
    )

    def write(self, call: ToolCall) -> str:
        """A call as GLM's template renders it after the generation prompt (leading newline)."""
        pairs = "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n"
            for k, v in call.arguments.items()
        )
        return f"\n{OPEN}{call.name}\n{pairs}{CLOSE}"

    def reasoning_reply(self, reasoning: str, answer: str, *, opened: bool) -> str:
        """GLM writes `\\n<think>REASONING</think>` before the answer."""
        return f"{'' if opened else chr(10) + '<think>'}{reasoning}</think>{answer}"

    def extract(self, body: str) -> Extracted | ParseError:
        """Every `<tool_call>` block; text before the first is content."""
        return extract_blocks(body, OPEN, CLOSE, _glm_call)


def _glm_call(inner: str) -> ToolCall | ParseError:
    """`NAME<arg_key>K</arg_key><arg_value>V</arg_value>...` (the inside of one block)."""
    first = inner.find("<arg_key>")
    name = (inner if first < 0 else inner[:first]).strip()
    if not name or "\n" in name or "<" in name:
        return ParseError(ParseErrorKind.MALFORMED, f"no tool name after {OPEN}")
    arguments: dict[str, str] = {}
    position = len(inner) if first < 0 else first
    while (pair := _PAIR.match(inner, position)) is not None:
        if pair.group(1).strip() in arguments:
            return ParseError(ParseErrorKind.MALFORMED, f"{pair.group(1)!r} given twice")
        arguments[pair.group(1).strip()] = pair.group(2)
        position = pair.end()
    if inner[position:].strip():
        return ParseError(
            ParseErrorKind.MALFORMED,
            f"unexpected text in the call: {quote(inner[position:])} (each argument must "
            "be <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>)",
        )
    return ToolCall(name=name, arguments=arguments)
