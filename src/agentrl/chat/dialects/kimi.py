"""Kimi-K2 calls: a tool-calls section with `functions.NAME:INDEX` ids and JSON arguments.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
    {"k": "v"}<|tool_call_end|><|tool_calls_section_end|>

(one line). The turn ends with `<|im_end|>`. Kimi-K2-Instruct has no reasoning block.
"""

from __future__ import annotations

import json
import re

from agentrl.chat.dialects.base import (
    Extracted,
    ToolCallDialect,
    extract_blocks,
    json_arguments,
)
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["KimiDialect"]

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
_ID = re.compile(r"(?:functions\.)?(.+?)(?::\d+)?")


class KimiDialect(ToolCallDialect):
    """Kimi-K2: `<|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>JSON...`."""

    name = "kimi_k2"
    families = "Kimi-K2-Instruct"
    stop_markers = ("<|im_end|>",)
    signature = (BEGIN, ARGS)
    reserved = (BEGIN, END, CALL, ARGS, CALL_END, ":")
    think = None

    def write(self, call: ToolCall) -> str:
        """The calls section with one call (index 0)."""
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        return f"{BEGIN}{CALL}functions.{call.name}:0{ARGS}{arguments}{CALL_END}{END}"

    def extract(self, body: str) -> Extracted | ParseError:
        """The calls of the section; text before it is content."""
        return extract_blocks(
            body, BEGIN, END, self._section, stray=(CALL, f"{CALL} outside {BEGIN}")
        )

    def _section(self, inner: str) -> list[ToolCall] | ParseError:
        chunks = inner.split(CALL)
        if chunks[0].strip():
            return ParseError(ParseErrorKind.MALFORMED, f"text inside {BEGIN} before a call")
        calls: list[ToolCall] = []
        for chunk in chunks[1:]:
            chunk = chunk.strip()
            if not chunk.endswith(CALL_END) or ARGS not in chunk:
                return ParseError(
                    ParseErrorKind.MALFORMED, f"a call must be {CALL}functions.NAME:N{ARGS}JSON"
                )
            ident, arguments = chunk[: -len(CALL_END)].split(ARGS, 1)
            match = _ID.fullmatch(ident.strip())
            if match is None:
                return ParseError(ParseErrorKind.MALFORMED, f"bad call id {ident!r}")
            parsed = json_arguments(arguments)
            if isinstance(parsed, ParseError):
                return parsed
            calls.append(ToolCall(name=match.group(1), arguments=parsed))
        return calls
