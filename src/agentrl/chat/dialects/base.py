"""The tool-call dialect contract: how one model family writes a call, and how to read it back.

A `ToolCallDialect` knows three things about a family and nothing about its chat template:
`write(call)` (the exact text a model of that family emits for a call), `parse(text)` (the
calls at the end of an assistant reply, or a typed `ParseError`; it never raises) and the
family's `stop_markers` (the tokens that end an assistant turn or a call). Reasoning blocks
(`<think>...</think>`, Harmony's analysis channel) are split off before calls are looked for,
so a call written inside reasoning is ignored. Pure: standard library only.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agentrl.core.types import ParseError, ParseErrorKind, ToolCall

__all__ = [
    "DialectParse",
    "Extracted",
    "ToolCallDialect",
    "arguments_from_json",
    "extract_blocks",
    "json_arguments",
    "load_json",
    "quote",
]

_SHOWN = 60
"""How many characters of offending text an error detail quotes."""


def quote(text: str) -> str:
    """`text` trimmed and cut for an error message."""
    text = text.strip()
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


@dataclass(frozen=True)
class DialectParse:
    """The calls read from one assistant reply, or why none could be read (never both)."""

    calls: tuple[ToolCall, ...] = ()
    error: ParseError | None = None
    content: str = ""
    """The visible text before the calls (reasoning and calls removed)."""
    reasoning: str | None = None
    """The reasoning block's text, when the reply had one."""

    @property
    def ok(self) -> bool:
        """True when the calls were read without error."""
        return self.error is None

    @classmethod
    def failure(cls, kind: ParseErrorKind, detail: str) -> DialectParse:
        """A failed parse."""
        return cls(error=ParseError(kind=kind, detail=detail))


@dataclass(frozen=True)
class Extracted:
    """What a dialect found in the reply text after reasoning: calls and the text around them."""

    calls: tuple[ToolCall, ...]
    content: str = ""
    trailing: str = ""
    """Text after the last call (must be blank)."""


BlockParser = Callable[[str], "ToolCall | Sequence[ToolCall] | ParseError"]
"""Reads the calls of one `OPEN ... CLOSE` block's inner text."""


def extract_blocks(
    body: str,
    open_: str,
    close: str,
    parse_block: BlockParser,
    *,
    stray: tuple[str, str] | None = None,
) -> Extracted | ParseError:
    """The calls of the consecutive `open_ ... close` blocks starting at the first `open_`.

    Text before the first block is content, text after the last is trailing. Without any
    `open_`, the reply has no call, unless `stray = (marker, detail)` names a marker whose
    presence means a malformed call (e.g. a closing tag without its opening one).
    """
    start = body.find(open_)
    if start < 0:
        if stray is not None and stray[0] in body:
            return ParseError(ParseErrorKind.MALFORMED, stray[1])
        return Extracted(calls=(), content=body.strip())
    calls: list[ToolCall] = []
    rest = body[start:]
    while rest.lstrip().startswith(open_):  # one block, or several in a row
        rest = rest.lstrip()[len(open_) :]
        end = rest.find(close)
        if end < 0:
            return ParseError(ParseErrorKind.MALFORMED, f"{open_} is never closed with {close}")
        found = parse_block(rest[:end])
        if isinstance(found, ParseError):
            return found
        calls.extend([found] if isinstance(found, ToolCall) else found)
        rest = rest[end + len(close) :]
    return Extracted(calls=tuple(calls), content=body[:start].strip(), trailing=rest)


def arguments_from_json(value: object) -> Mapping[str, str] | ParseError:
    """Arguments from a decoded JSON object: strings kept, other values as their JSON text."""
    if not isinstance(value, dict):
        return ParseError(ParseErrorKind.MALFORMED, "the call's arguments must be a JSON object")
    out: dict[str, str] = {}
    for key, item in value.items():
        out[str(key)] = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
    return out


def json_arguments(text: str) -> Mapping[str, str] | ParseError:
    """A call's arguments from their JSON text (a typed MALFORMED error, never an exception)."""
    decoded = load_json(text, "the call's arguments")
    return decoded if isinstance(decoded, ParseError) else arguments_from_json(decoded)


def load_json(text: str, what: str) -> object | ParseError:
    """`json.loads` that returns a typed MALFORMED error instead of raising."""
    try:
        decoded: object = json.loads(text)
    except json.JSONDecodeError as exc:
        return ParseError(ParseErrorKind.MALFORMED, f"{what} is not valid JSON ({exc.msg})")
    except RecursionError:
        return ParseError(ParseErrorKind.MALFORMED, f"{what} is nested too deeply")
    return decoded


class ToolCallDialect(ABC):
    """One model family's tool-call format: parse, write and stop markers."""

    name: ClassVar[str]
    """The dialect's name (`--tool-dialect NAME`)."""
    families: ClassVar[str]
    """The model families that write calls this way."""
    stop_markers: ClassVar[tuple[str, ...]]
    """Texts of the tokens that end an assistant turn or a call."""
    signature: ClassVar[tuple[str, ...]]
    """Substrings that all occur in a chat template of this family (for detection)."""
    reserved: ClassVar[tuple[str, ...]] = ()
    """Markers that cannot occur inside a tool name, key or value of this dialect."""
    think: ClassVar[tuple[str, str] | None] = ("<think>", "</think>")
    """Open and close markers of a reasoning block, when the family has them."""
    reasoning_key: ClassVar[str] = "reasoning_content"
    """The assistant-message field the family's template reads reasoning from."""

    @abstractmethod
    def write(self, call: ToolCall) -> str:
        """The exact text a model of this family emits for `call` (without the stop token)."""

    @abstractmethod
    def extract(self, body: str) -> Extracted | ParseError:
        """Find the calls in a reply whose reasoning was already removed."""

    def reasoning_reply(self, reasoning: str, answer: str, *, opened: bool) -> str:
        """A reply in the family's reasoning form; `opened` when the prompt opened the block."""
        if self.think is None:
            return answer
        start, end = self.think
        return f"{'' if opened else start + chr(10)}{reasoning}\n{end}\n\n{answer}"

    def split_reasoning(self, text: str) -> tuple[str | None, str] | ParseError:
        """(reasoning, rest) of a reply; an unclosed reasoning block is a NO_CALL error."""
        if self.think is None:
            return None, text
        start, end = self.think
        if end in text:
            head, rest = text.rsplit(end, 1)
            return head.split(start, 1)[-1].strip(), rest
        if start in text:
            return ParseError(ParseErrorKind.NO_CALL, f"the {start} block is never closed")
        return None, text

    def parse(
        self,
        text: str,
        *,
        tools: Collection[str] | None = None,
        max_calls: int | None = 1,
        truncated: bool = False,
    ) -> DialectParse:
        """The calls at the end of `text`, or a typed error; never raises.

        `tools` are the known tool names (None: any), `max_calls` the most calls one reply may
        make (None: no limit), `truncated` True when the sampler stopped at its token limit.
        """
        try:
            return self._parse(text, tools, max_calls, truncated)
        except Exception as exc:  # a parser bug must not kill a rollout; report it as malformed
            return DialectParse.failure(
                ParseErrorKind.MALFORMED, f"unparseable reply ({type(exc).__name__})"
            )

    def _parse(
        self, text: str, tools: Collection[str] | None, max_calls: int | None, truncated: bool
    ) -> DialectParse:
        if truncated:
            return DialectParse.failure(
                ParseErrorKind.TRUNCATED,
                "the reply was cut off by the per-turn token limit before it ended",
            )
        split = self.split_reasoning(text)
        if isinstance(split, ParseError):
            return DialectParse(error=split)
        reasoning, body = split
        found = self.extract(body)
        if isinstance(found, ParseError):
            return DialectParse(error=found, reasoning=reasoning)
        if not found.calls:
            names = f" of {', '.join(sorted(tools))}" if tools else ""
            return DialectParse.failure(
                ParseErrorKind.NO_CALL,
                f"no tool call found; end the reply with a call{names} in the {self.name} format",
            )
        if max_calls is not None and len(found.calls) > max_calls:
            return DialectParse.failure(
                ParseErrorKind.MULTIPLE_CALLS,
                f"{len(found.calls)} tool calls; make at most {max_calls} per turn",
            )
        if found.trailing.strip():
            return DialectParse.failure(
                ParseErrorKind.TEXT_AFTER_CALL,
                f"text after the call: {quote(found.trailing)}; the call must end the reply",
            )
        for call in found.calls:
            if tools is not None and call.name not in tools:
                known = ", ".join(sorted(tools)) or "none"
                return DialectParse.failure(
                    ParseErrorKind.UNKNOWN_TOOL, f"unknown tool {call.name!r}; known: {known}"
                )
        return DialectParse(calls=found.calls, content=found.content, reasoning=reasoning)
