"""DeepSeek-V3.1 / V3.2 marker calls.

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{"k": "v"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>

(one line; several `<｜tool▁call▁begin｜>` blocks are several calls). The turn ends with
`<｜end▁of▁sentence｜>`. With `thinking=True` the reply starts inside a `<think>` block.
"""

from __future__ import annotations

import json

from agentrl.chat.dialects.base import (
    Extracted,
    ToolCallDialect,
    extract_blocks,
    json_arguments,
)
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["DeepSeekDialect"]

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


class DeepSeekDialect(ToolCallDialect):
    """DeepSeek-V3.1 / V3.2: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>JSON<｜tool▁call▁end｜>`."""

    name = "deepseek_v3"
    families = "DeepSeek-V3.1, DeepSeek-V3.2"
    stop_markers = ("<｜end▁of▁sentence｜>",)
    signature = (BEGIN, SEP)
    reserved = (BEGIN, END, CALL, SEP, CALL_END, "<think>", "</think>")

    def write(self, call: ToolCall) -> str:
        """The calls section with one call, exactly as DeepSeek's template renders it."""
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        return f"{BEGIN}{CALL}{call.name}{SEP}{arguments}{CALL_END}{END}"

    def extract(self, body: str) -> Extracted | ParseError:
        """The calls between the section markers; text before the section is content."""
        return extract_blocks(
            body, BEGIN, END, self._section, stray=(CALL, f"{CALL} outside {BEGIN}")
        )

    def _section(self, inner: str) -> list[ToolCall] | ParseError:
        calls: list[ToolCall] = []
        for chunk in inner.split(CALL)[1:]:
            if not chunk.strip().endswith(CALL_END) or SEP not in chunk:
                return ParseError(
                    ParseErrorKind.MALFORMED, f"a call must be {CALL}NAME{SEP}JSON{CALL_END}"
                )
            name, arguments = chunk.strip()[: -len(CALL_END)].split(SEP, 1)
            parsed = json_arguments(arguments)
            if isinstance(parsed, ParseError):
                return parsed
            calls.append(ToolCall(name=name.strip(), arguments=parsed))
        if inner.split(CALL)[0].strip():
            return ParseError(
                ParseErrorKind.MALFORMED, f"text inside {BEGIN} before the first call"
            )
        return calls
