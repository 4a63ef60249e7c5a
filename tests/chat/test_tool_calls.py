"""The tool-call parser: every accepted form, every typed error, and fuzzing (never raises)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.tool_calls import json_tool_call, normalize_action, parse_tool_call, xml_tool_call
from agentrl.types import ParsedAction, ParseErrorKind

TOOL = "alfworld_step"


def parse(text: str, truncated: bool = False) -> ParsedAction:
    return parse_tool_call(text, tool_name=TOOL, parameter="action", truncated=truncated)


def kind(text: str, truncated: bool = False) -> ParseErrorKind | None:
    result = parse(text, truncated)
    return None if result.error is None else result.error.kind


XML = xml_tool_call(TOOL, {"action": "go to countertop 1"})
JSON = json_tool_call(TOOL, {"action": "go to countertop 1"})


@pytest.mark.parametrize(
    "text",
    [
        XML,
        JSON,
        "I should go there.\n" + XML,
        "<think>\nthe apple may be on the countertop\n</think>\n\n" + XML + "\n\n",
        "<tool_call><function=alfworld_step><parameter=action>go to countertop 1"
        "</parameter></function></tool_call>",
        '<tool_call>{"name": "alfworld_step", "arguments": {"action": "go to countertop 1"}}'
        "</tool_call>",
        '<tool_call>{"name": "alfworld_step", '
        '"arguments": "{\\"action\\": \\"go to countertop 1\\"}"}</tool_call>',
        "<tool_call>\n<function= alfworld_step >\n<parameter= action >\n  Go   To\tCountertop 1 \n"
        "</parameter>\n</function>\n</tool_call>",
    ],
)
def test_accepts_xml_and_json_calls(text: str) -> None:
    result = parse(text)
    assert result.ok, result.error
    assert result.action == "go to countertop 1"
    assert result.call is not None
    assert result.call.name == TOOL and dict(result.call.arguments) == {
        "action": "go to countertop 1"
    }


def call_with(inner: str) -> str:
    return f"<tool_call>\n{inner}\n</tool_call>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go to countertop 1", ParseErrorKind.NO_CALL),
        ("", ParseErrorKind.NO_CALL),
        ("<think>\nstill thinking about " + XML, ParseErrorKind.NO_CALL),
        (XML + "\n" + XML, ParseErrorKind.MULTIPLE_CALLS),
        (
            call_with(
                "<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>\n</function>\n"
                "<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>\n</function>"
            ),
            ParseErrorKind.MULTIPLE_CALLS,
        ),
        (xml_tool_call("move", {"action": "look"}), ParseErrorKind.UNKNOWN_TOOL),
        (json_tool_call("Alfworld_Step", {"action": "look"}), ParseErrorKind.UNKNOWN_TOOL),
        (xml_tool_call(TOOL, {"command": "look"}), ParseErrorKind.MISSING_ACTION),
        (call_with('{"name": "alfworld_step"}'), ParseErrorKind.MISSING_ACTION),
        (json_tool_call(TOOL, {"command": "look"}), ParseErrorKind.MISSING_ACTION),
        (xml_tool_call(TOOL, {"action": "   "}), ParseErrorKind.EMPTY_ACTION),
        (json_tool_call(TOOL, {"action": ""}), ParseErrorKind.EMPTY_ACTION),
        (xml_tool_call(TOOL, {"action": "go to desk 1\nlook"}), ParseErrorKind.MULTILINE_ACTION),
        (json_tool_call(TOOL, {"action": "look\r\nlook"}), ParseErrorKind.MULTILINE_ACTION),
        (
            call_with('{"name": "alfworld_step", "arguments": {"action": "look"'),
            ParseErrorKind.MALFORMED,
        ),
        (
            call_with('{"name": "alfworld_step", "arguments": {"action": 3}}'),
            ParseErrorKind.MALFORMED,
        ),
        (call_with('["alfworld_step", "look"]'), ParseErrorKind.MALFORMED),
        (call_with('{"name": 7, "arguments": {}}'), ParseErrorKind.MALFORMED),
        (call_with('{"name": "alfworld_step", "arguments": "look"}'), ParseErrorKind.MALFORMED),
        (call_with('{"name": "alfworld_step", "arguments": [1]}'), ParseErrorKind.MALFORMED),
        (
            call_with("<function=alfworld_step>\n<parameter=action>\nlook\n</function>"),
            ParseErrorKind.MALFORMED,
        ),
        (call_with("<function=alfworld_step>look</function>"), ParseErrorKind.MALFORMED),
        (
            call_with("<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>"),
            ParseErrorKind.MALFORMED,
        ),
        (
            call_with(
                "<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>\n"
                "<parameter=action>\nlook\n</parameter>\n</function>"
            ),
            ParseErrorKind.MALFORMED,
        ),
        (xml_tool_call(TOOL, {"action": "look", "why": "curious"}), ParseErrorKind.MALFORMED),
        (call_with("alfworld_step(action='look')"), ParseErrorKind.MALFORMED),
        ("<tool_call>\n\n</tool_call>", ParseErrorKind.MALFORMED),
        (
            "<tool_call>\n<function=alfworld_step>\n<parameter=action>\nlook",
            ParseErrorKind.MALFORMED,
        ),
        ("look</tool_call>", ParseErrorKind.MALFORMED),
        (XML + "</tool_call>", ParseErrorKind.MALFORMED),
        (XML + "\nI hope that works.", ParseErrorKind.TEXT_AFTER_CALL),
        (JSON + " ok", ParseErrorKind.TEXT_AFTER_CALL),
    ],
)
def test_typed_errors(text: str, expected: ParseErrorKind) -> None:
    result = parse(text)
    assert not result.ok
    assert result.error is not None and result.error.kind is expected, result.error
    assert result.error.detail


def test_truncated_output_is_always_an_error() -> None:
    assert kind(XML, truncated=True) is ParseErrorKind.TRUNCATED
    assert kind("<tool_call>\n<function=alfworld_step>\n<param", truncated=True) is (
        ParseErrorKind.TRUNCATED
    )


def test_details_name_the_problem() -> None:
    result = parse(xml_tool_call("teleport", {"action": "look"}))
    assert result.error is not None and "'teleport'" in result.error.detail
    result = parse(XML + "\nDone!")
    assert result.error is not None and "Done!" in result.error.detail


def test_normalize_action() -> None:
    assert normalize_action("  Take  Apple 1\tfrom   TABLE 2 ") == "take apple 1 from table 2"


# --- fuzzing -------------------------------------------------------------------------------

FRAGMENTS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "<function=alfworld_step>",
        "</function>",
        "<parameter=",
        "<parameter=action>",
        "</parameter>",
        "<think>",
        "</think>",
        "{",
        "}",
        '"name"',
        '"arguments"',
        '"alfworld_step"',
        '"action"',
        ":",
        ",",
        "[",
        "]",
        '"',
        "\\",
        "\n",
        " ",
        "\t",
        ">",
        "<",
        "=",
        "go to desk 1",
        "look",
        "null",
        "1e999",
        "\u2028",
        "é",
    ]
)


def check_result(result: ParsedAction) -> None:
    assert isinstance(result, ParsedAction)
    if result.ok:
        assert result.action is not None
        assert result.action == normalize_action(result.action)
        assert result.action and len(result.action.splitlines()) == 1
        assert result.call is not None and result.call.name == TOOL
    else:
        assert result.error is not None
        assert not result.error.detail.startswith("unparseable reply"), result.error


@settings(max_examples=2500, deadline=None)
@given(text=st.text(max_size=200), truncated=st.booleans())
def test_fuzz_arbitrary_text_never_raises(text: str, truncated: bool) -> None:
    check_result(parse(text, truncated))


@settings(max_examples=2500, deadline=None)
@given(parts=st.lists(FRAGMENTS, max_size=40))
def test_fuzz_markup_soup_never_raises(parts: list[str]) -> None:
    check_result(parse("".join(parts)))


SINGLE_LINE = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029<>",
    ),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() != "")


@settings(max_examples=1500, deadline=None)
@given(
    action=SINGLE_LINE,
    style=st.sampled_from(["xml", "json"]),
    before=st.text(alphabet="abc .,!\n", max_size=30),
    after=st.sampled_from(["", "\n", "  \n\n"]),
)
def test_fuzz_round_trip(action: str, style: str, before: str, after: str) -> None:
    call = (xml_tool_call if style == "xml" else json_tool_call)(TOOL, {"action": action})
    result = parse(before + call + after)
    assert result.ok, (result.error, action)
    assert result.action == normalize_action(action)


@settings(max_examples=500, deadline=None)
@given(action=SINGLE_LINE, junk=st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != ""))
def test_fuzz_text_after_call_is_rejected(action: str, junk: str) -> None:
    text = xml_tool_call(TOOL, {"action": action}) + junk
    result = parse(text)
    assert not result.ok
    assert result.error is not None and result.error.kind in (
        ParseErrorKind.TEXT_AFTER_CALL,
        ParseErrorKind.MULTIPLE_CALLS,
        ParseErrorKind.MALFORMED,
    )


def test_json_helper_is_valid_json() -> None:
    inner = JSON.removeprefix("<tool_call>").removesuffix("</tool_call>")
    assert json.loads(inner) == {"name": TOOL, "arguments": {"action": "go to countertop 1"}}
