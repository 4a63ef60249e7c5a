"""Qwen's `<tool_call>` dialects: Hermes JSON (Qwen2.5, Qwen3) and XML (Qwen3-Coder, Qwen3.5).

    <tool_call>
    {"name": "alfworld_step", "arguments": {"action": "go to desk 1"}}
    </tool_call>

    <tool_call>
    <function=alfworld_step>
    <parameter=action>
    go to desk 1
    </parameter>
    </function>
    </tool_call>

Both dialects read both forms (a Qwen model trained on one sometimes writes the other); each
writes its own. Several `<tool_call>` blocks in a row are several calls.
"""

from __future__ import annotations

import json
import re

from agentrl.chat.dialects.base import (
    Extracted,
    ToolCallDialect,
    arguments_from_json,
    extract_blocks,
    load_json,
    quote,
)
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["QwenJsonDialect", "QwenXmlDialect"]

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*)</function>", re.DOTALL)
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]*)>\n?(.*?)\n?</parameter>", re.DOTALL)


def _xml_call(inner: str) -> ToolCall | ParseError:
    if inner.count("<function=") > 1:
        return ParseError(ParseErrorKind.MULTIPLE_CALLS, "several <function=...> in one call")
    match = _FUNCTION.fullmatch(inner)
    if match is None:
        return ParseError(
            ParseErrorKind.MALFORMED,
            "expected <function=NAME> <parameter=KEY>VALUE</parameter> </function>",
        )
    params: dict[str, str] = {}
    body, position = match.group(2), 0
    while (param := _PARAMETER.match(body, position)) is not None:
        key = param.group(1).strip()
        if key in params:
            return ParseError(ParseErrorKind.MALFORMED, f"parameter {key!r} given twice")
        params[key] = param.group(2)
        position = param.end()
    if body[position:].strip():
        return ParseError(
            ParseErrorKind.MALFORMED,
            f"unexpected text inside <function=...>: {quote(body[position:])} "
            "(each argument must be <parameter=KEY>VALUE</parameter>)",
        )
    return ToolCall(name=match.group(1).strip(), arguments=params)


def _json_call(inner: str) -> ToolCall | ParseError:
    payload = load_json(inner, "the call")
    if isinstance(payload, ParseError):
        return payload
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ParseError(ParseErrorKind.MALFORMED, 'the call must be a JSON object with "name"')
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):  # some models double-encode the arguments object
        arguments = load_json(arguments, '"arguments"')
        if isinstance(arguments, ParseError):
            return arguments
    parsed = arguments_from_json(arguments)
    if isinstance(parsed, ParseError):
        return parsed
    return ToolCall(name=payload["name"].strip(), arguments=parsed)


class _QwenDialect(ToolCallDialect):
    stop_markers = ("<|im_end|>", "<|endoftext|>")
    reserved = (OPEN, CLOSE, "<think>", "</think>", "<function=", "</function>", "<parameter=")

    def extract(self, body: str) -> Extracted | ParseError:
        """Every `<tool_call>` block (JSON or XML inside); text after the last one is trailing."""
        return extract_blocks(
            body, OPEN, CLOSE, _qwen_call, stray=(CLOSE, f"{CLOSE} without a matching {OPEN}")
        )


class QwenJsonDialect(_QwenDialect):
    """Hermes-style JSON inside `<tool_call>` (Qwen2.5, Qwen3 hybrid and 2507 models)."""

    name = "qwen_json"
    families = "Qwen2.5, Qwen3, Qwen3-2507 (Hermes JSON)"
    signature = (OPEN, '"arguments"')

    def write(self, call: ToolCall) -> str:
        """`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`."""
        payload = {"name": call.name, "arguments": dict(call.arguments)}
        return f"{OPEN}\n{json.dumps(payload, ensure_ascii=False)}\n{CLOSE}"


class QwenXmlDialect(_QwenDialect):
    """Qwen3.5 / Qwen3-Coder XML inside `<tool_call>` (and agentrl's own Qwen template)."""

    name = "qwen_xml"
    families = "Qwen3.5, Qwen3-Coder (XML)"
    signature = (OPEN, "<function=", "<parameter=")

    def write(self, call: ToolCall) -> str:
        """`<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n...`."""
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in call.arguments.items())
        return f"{OPEN}\n<function={call.name}>\n{params}</function>\n{CLOSE}"


def _qwen_call(block: str) -> ToolCall | ParseError:
    """The call inside one `<tool_call>` block, in either Qwen form."""
    inner = block.strip()
    if OPEN in inner:
        return ParseError(ParseErrorKind.MALFORMED, f"{OPEN} inside another {OPEN}")
    if inner.startswith("<function"):
        return _xml_call(inner)
    if inner.startswith("{"):
        return _json_call(inner)
    return ParseError(
        ParseErrorKind.MALFORMED,
        f"expected <function=NAME> or a JSON object inside {OPEN}, got {quote(inner)}",
    )
