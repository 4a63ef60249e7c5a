"""Tool-call dialects: round trips (hypothesis), bad input per family, detection."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentrl.chat.dialects import (
    DIALECTS,
    DialectError,
    ToolCallDialect,
    detect_dialect,
    dialect_for,
)
from agentrl.types import ParseErrorKind, ToolCall

ALL = list(DIALECTS.values())
IDS = [d.name for d in ALL]

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
values = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
arguments = st.dictionaries(names, values, max_size=4)


def fits(dialect: ToolCallDialect, call: ToolCall) -> bool:
    """Whether the call's texts avoid the dialect's own markers (no format can hold those)."""
    texts = [call.name, *call.arguments, *call.arguments.values()]
    return not any(marker in text for marker in dialect.reserved for text in texts)


@pytest.mark.parametrize("dialect", ALL, ids=IDS)
@settings(max_examples=150, deadline=None)
@given(name=names, args=arguments)
def test_parse_of_write_is_the_call(
    dialect: ToolCallDialect, name: str, args: dict[str, str]
) -> None:
    call = ToolCall(name=name, arguments=args)
    assume(fits(dialect, call))
    parsed = dialect.parse(dialect.write(call))
    assert parsed.error is None, parsed.error
    assert parsed.calls == (call,)


@pytest.mark.parametrize("dialect", ALL, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200))
def test_parse_never_raises(dialect: ToolCallDialect, text: str) -> None:
    parsed = dialect.parse(text, tools={"step"})
    assert (parsed.error is None) == bool(parsed.calls)


CALL = ToolCall(name="step", arguments={"action": "go to desk 1"})


def reasoned(dialect: ToolCallDialect, reasoning: str, answer: str) -> str:
    return dialect.reasoning_reply(reasoning, answer, opened=False)


@pytest.mark.parametrize("dialect", ALL, ids=IDS)
def test_bad_input_is_a_typed_error(dialect: ToolCallDialect) -> None:
    written = dialect.write(CALL)
    cases = {
        "truncated": (written[: len(written) // 2], ParseErrorKind.MALFORMED),
        "two calls": (written + dialect.write(CALL), ParseErrorKind.MULTIPLE_CALLS),
        "wrong tool": (
            dialect.write(ToolCall("jump", {"action": "x"})),
            ParseErrorKind.UNKNOWN_TOOL,
        ),
        "no call": ("I will look around.", ParseErrorKind.NO_CALL),
    }
    for label, (text, kind) in cases.items():
        parsed = dialect.parse(text, tools={"step"})
        assert parsed.error is not None and parsed.error.kind is kind, (label, text, parsed)
    cut = dialect.parse(written, tools={"step"}, truncated=True)
    assert cut.error is not None and cut.error.kind is ParseErrorKind.TRUNCATED
    assert dialect.parse(written + written, tools={"step"}, max_calls=None).calls == (CALL, CALL)


@pytest.mark.parametrize("dialect", ALL, ids=IDS)
def test_non_json_arguments_are_malformed(dialect: ToolCallDialect) -> None:
    written = dialect.write(ToolCall("step", {"action": "PLACEHOLDER"}))
    if dialect.name in ("qwen_xml", "glm4"):  # arguments are tags, not JSON: break a tag
        broken = written.replace("</", "<", 1)
    else:
        payload = '{"action": "PLACEHOLDER"}'
        assert payload in written, written
        broken = written.replace(payload, "{action: PLACEHOLDER")
    parsed = dialect.parse(broken, tools={"step"})
    assert parsed.error is not None and parsed.error.kind is ParseErrorKind.MALFORMED, parsed


@pytest.mark.parametrize(
    "dialect",
    [d for d in ALL if d.think or d.name == "harmony"],
    ids=lambda d: d.name,
)
def test_calls_inside_reasoning_are_ignored(dialect: ToolCallDialect) -> None:
    mention = dialect.write(CALL)
    if dialect.name == "harmony":  # control tokens cannot occur inside a message: plain text
        mention = 'to=functions.step {"action": "go to desk 1"}'
    only_thinking = reasoned(dialect, f"Maybe {mention} later.", "I am done.")
    parsed = dialect.parse(only_thinking, tools={"step"})
    assert parsed.error is not None and parsed.error.kind is ParseErrorKind.NO_CALL, parsed
    both = reasoned(dialect, f"Maybe {mention.replace('step', 'jump')}.", dialect.write(CALL))
    parsed = dialect.parse(both, tools={"step"})
    assert parsed.calls == (CALL,) and parsed.reasoning is not None
    if dialect.think is not None:
        unclosed = dialect.parse(f"{dialect.think[0]}\nhmm {dialect.write(CALL)}")
        assert unclosed.error is not None and unclosed.error.kind is ParseErrorKind.NO_CALL


def test_text_after_the_call_is_refused() -> None:
    dialect = dialect_for("qwen_xml")
    parsed = dialect.parse(dialect.write(CALL) + "\nDone!", tools={"step"})
    assert parsed.error is not None and parsed.error.kind is ParseErrorKind.TEXT_AFTER_CALL


def test_harmony_reads_the_templates_header_order_too() -> None:
    rendered = ' to=functions.step<|channel|>commentary json<|message|>{"action": "go to desk 1"}'
    assert dialect_for("harmony").parse(rendered).calls == (CALL,)


def test_unknown_names_and_templates_name_the_flag() -> None:
    with pytest.raises(DialectError, match=r"--tool-dialect .nope.*qwen_xml"):
        dialect_for("nope")
    with pytest.raises(DialectError, match="--tool-dialect NAME"):
        detect_dialect("{{ messages[0].content }}")
