"""Llama 3.x JSON calls: the whole reply is `{"name": NAME, "parameters": {...}}`.

Llama 3.1-3.3 Instruct write one JSON object per call (optionally after `<|python_tag|>`) and
end the turn with `<|eot_id|>` (or `<|eom_id|>` when they expect a tool result). Several objects
(separated by `;` or whitespace) are several calls. The model has no reasoning block.
"""

from __future__ import annotations

import json

from agentrl.chat.dialects.base import Extracted, ToolCallDialect, arguments_from_json
from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = ["LlamaJsonDialect"]

PYTHON_TAG = "<|python_tag|>"


class LlamaJsonDialect(ToolCallDialect):
    """Llama 3.x Instruct: a JSON object with `name` and `parameters`."""

    name = "llama3_json"
    families = "Llama 3.1, 3.2, 3.3 Instruct"
    stop_markers = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
    signature = ("<|start_header_id|>", '"parameters"')
    think = None

    def write(self, call: ToolCall) -> str:
        """`{"name": NAME, "parameters": {...}}`, as Llama's template renders a call."""
        payload = {"name": call.name, "parameters": dict(call.arguments)}
        return json.dumps(payload, ensure_ascii=False)

    def extract(self, body: str) -> Extracted | ParseError:
        """JSON objects from the first `{` on; prose before it is content."""
        text = body.replace(PYTHON_TAG, "")
        start = text.find("{")
        if start < 0:
            return Extracted(calls=(), content=text.strip())
        decoder = json.JSONDecoder()
        calls: list[ToolCall] = []
        position = start
        while position < len(text) and text[position] == "{":
            try:
                payload, position = decoder.raw_decode(text, position)
            except json.JSONDecodeError as exc:
                return ParseError(
                    ParseErrorKind.MALFORMED, f"the call is not valid JSON: {exc.msg}"
                )
            except RecursionError:
                return ParseError(ParseErrorKind.MALFORMED, "the call is nested too deeply")
            if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
                return ParseError(ParseErrorKind.MALFORMED, 'a call needs a string "name"')
            raw = payload.get("parameters", payload.get("arguments", {}))
            if isinstance(raw, str):
                return ParseError(ParseErrorKind.MALFORMED, '"parameters" must be a JSON object')
            arguments = arguments_from_json(raw)
            if isinstance(arguments, ParseError):
                return arguments
            calls.append(ToolCall(name=payload["name"].strip(), arguments=arguments))
            rest = text[position:].lstrip()
            if rest.startswith(";"):
                rest = rest[1:].lstrip()
            position = len(text) - len(rest)
        return Extracted(calls=tuple(calls), content=text[:start].strip(), trailing=text[position:])
