"""Parse (and write) single tool calls in the two formats Qwen models emit; never raises.

Accepted forms, each as the last thing in the reply (text and a `<think>` block before it are
fine):

    <tool_call>
    <function=alfworld_step>
    <parameter=action>
    go to countertop 1
    </parameter>
    </function>
    </tool_call>

    <tool_call>{"name": "alfworld_step", "arguments": {"action": "go to countertop 1"}}</tool_call>

Whitespace between tags is free. The action is normalised (trimmed, inner whitespace collapsed,
lower-cased). Everything else is a typed `ParseError`: no call, several calls, unknown tool,
missing / empty / multi-line action, malformed JSON or XML, text after the call, or a reply cut
off by the token limit. Pure: standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from agentrl.core.types import ParsedAction, ParseErrorKind, ToolCall

__all__ = [
    "check_command_call",
    "json_tool_call",
    "normalize_action",
    "parse_tool_call",
    "xml_tool_call",
]

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*)</function>", re.DOTALL)
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]*)>(.*?)</parameter>", re.DOTALL)
_SHOWN = 60
"""How many characters of offending text an error detail quotes."""


def normalize_action(action: str) -> str:
    """Trim, collapse inner whitespace to single spaces and lower-case."""
    return " ".join(action.split()).lower()


def xml_tool_call(name: str, arguments: Mapping[str, str]) -> str:
    """A call in the Qwen3.5 XML form, exactly as agentrl's Qwen chat template renders it."""
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
    return f"{OPEN}\n<function={name}>\n{params}</function>\n{CLOSE}"


def json_tool_call(name: str, arguments: Mapping[str, str]) -> str:
    """A call in the Qwen2.5/Qwen3 JSON form."""
    payload = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"{OPEN}\n{payload}\n{CLOSE}"


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _fail(kind: ParseErrorKind, detail: str) -> ParsedAction:
    return ParsedAction.failure(kind, detail)


def parse_tool_call(
    text: str, *, tool_name: str, parameter: str = "action", truncated: bool = False
) -> ParsedAction:
    """Parse one call of `tool_name(parameter: str)` at the end of `text`; never raises.

    `truncated` is True when the sampler stopped at its token limit: the reply is then
    rejected as `TRUNCATED` whatever it contains.
    """
    try:
        return _parse(text, tool_name, parameter, truncated)
    except Exception as exc:  # a parser bug must not kill a rollout; report it as malformed
        return _fail(ParseErrorKind.MALFORMED, f"unparseable reply ({type(exc).__name__})")


def _parse(text: str, tool_name: str, parameter: str, truncated: bool) -> ParsedAction:
    if truncated:
        return _fail(
            ParseErrorKind.TRUNCATED,
            "the reply was cut off by the per-turn token limit before it ended",
        )
    body = text
    if "</think>" in body:
        body = body.rsplit("</think>", 1)[1]
    elif "<think>" in body:
        return _fail(ParseErrorKind.NO_CALL, "the <think> block is never closed with </think>")
    opens, closes = body.count(OPEN), body.count(CLOSE)
    if opens == 0:
        if closes:
            return _fail(ParseErrorKind.MALFORMED, f"{CLOSE} without a matching {OPEN}")
        return _fail(
            ParseErrorKind.NO_CALL,
            f"no {OPEN} found; end the reply with exactly one call of {tool_name}",
        )
    if opens > 1:
        return _fail(
            ParseErrorKind.MULTIPLE_CALLS, f"{opens} tool calls; make exactly one call per turn"
        )
    start = body.index(OPEN) + len(OPEN)
    end = body.find(CLOSE, start)
    if end < 0:
        return _fail(ParseErrorKind.MALFORMED, f"{OPEN} is never closed with {CLOSE}")
    if closes > 1:
        return _fail(ParseErrorKind.MALFORMED, f"{closes} {CLOSE} tags for one {OPEN}")
    after = body[end + len(CLOSE) :]
    if after.strip():
        return _fail(
            ParseErrorKind.TEXT_AFTER_CALL,
            f"text after {CLOSE}: {_quote(after)}; the call must end the reply",
        )
    inner = body[start:end].strip()
    if inner.startswith("<function"):
        return _parse_xml(inner, tool_name, parameter)
    if inner.startswith("{"):
        return _parse_json(inner, tool_name, parameter)
    if not inner:
        return _fail(ParseErrorKind.MALFORMED, f"empty {OPEN} block")
    return _fail(
        ParseErrorKind.MALFORMED,
        f"expected <function={tool_name}> or a JSON object inside {OPEN}, got {_quote(inner)}",
    )


def _parse_xml(inner: str, tool_name: str, parameter: str) -> ParsedAction:
    if inner.count("<function=") > 1:
        return _fail(
            ParseErrorKind.MULTIPLE_CALLS,
            "several <function=...> blocks; make exactly one call per turn",
        )
    match = _FUNCTION.fullmatch(inner)
    if match is None:
        return _fail(
            ParseErrorKind.MALFORMED,
            "expected <function=NAME> <parameter=KEY>VALUE</parameter> </function>",
        )
    name = match.group(1).strip()
    if name != tool_name:
        return _fail(ParseErrorKind.UNKNOWN_TOOL, f"unknown tool {name!r}; use {tool_name}")
    params: dict[str, str] = {}
    body = match.group(2)
    position = 0
    while True:
        param = _PARAMETER.match(body, position)
        if param is None:
            break
        key = param.group(1).strip()
        if key in params:
            return _fail(ParseErrorKind.MALFORMED, f"parameter {key!r} given twice")
        params[key] = param.group(2)
        position = param.end()
    rest = body[position:]
    if rest.strip():
        return _fail(
            ParseErrorKind.MALFORMED,
            f"unexpected text inside <function={name}>: {_quote(rest)} "
            "(each argument must be <parameter=KEY>VALUE</parameter>)",
        )
    return _action(params, tool_name, parameter)


def _parse_json(inner: str, tool_name: str, parameter: str) -> ParsedAction:
    try:
        payload = json.loads(inner)
    except json.JSONDecodeError as exc:
        return _fail(ParseErrorKind.MALFORMED, f"invalid JSON in the call: {exc.msg}")
    except RecursionError:
        return _fail(ParseErrorKind.MALFORMED, "invalid JSON in the call: nested too deeply")
    if not isinstance(payload, dict):
        return _fail(ParseErrorKind.MALFORMED, "the JSON call must be an object")
    name = payload.get("name")
    if not isinstance(name, str):
        return _fail(ParseErrorKind.MALFORMED, 'the JSON call needs a string "name"')
    if name.strip() != tool_name:
        return _fail(ParseErrorKind.UNKNOWN_TOOL, f"unknown tool {name!r}; use {tool_name}")
    if "arguments" not in payload:
        return _fail(ParseErrorKind.MISSING_ACTION, f'no "arguments" with {parameter!r}')
    arguments = payload["arguments"]
    if isinstance(arguments, str):  # some models double-encode the arguments object
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return _fail(ParseErrorKind.MALFORMED, '"arguments" is a string but not JSON')
    if not isinstance(arguments, dict):
        return _fail(ParseErrorKind.MALFORMED, '"arguments" must be a JSON object')
    params: dict[str, str] = {}
    for key, value in arguments.items():
        if not isinstance(value, str):
            return _fail(ParseErrorKind.MALFORMED, f"argument {key!r} must be a string")
        params[key] = value
    return _action(params, tool_name, parameter)


def check_command_call(
    call: ToolCall, *, tool_name: str, parameter: str = "action"
) -> ParsedAction:
    """Check a call read by a dialect against `tool_name(parameter: str)`; never raises."""
    if call.name != tool_name:
        return _fail(ParseErrorKind.UNKNOWN_TOOL, f"unknown tool {call.name!r}; use {tool_name}")
    return _action(dict(call.arguments), tool_name, parameter)


def _action(params: dict[str, str], tool_name: str, parameter: str) -> ParsedAction:
    if parameter not in params:
        return _fail(ParseErrorKind.MISSING_ACTION, f"{tool_name} needs the argument {parameter!r}")
    extra = sorted(set(params) - {parameter})
    if extra:
        return _fail(
            ParseErrorKind.MALFORMED,
            f"unexpected arguments {extra}; {tool_name} takes only {parameter!r}",
        )
    value = params[parameter].strip()
    if not value:
        return _fail(ParseErrorKind.EMPTY_ACTION, f"the {parameter!r} argument is empty")
    if len(value.splitlines()) > 1:
        return _fail(
            ParseErrorKind.MULTILINE_ACTION,
            f"the {parameter!r} argument spans several lines; give one command",
        )
    action = normalize_action(value)
    return ParsedAction(action=action, call=ToolCall(name=tool_name, arguments={parameter: action}))
