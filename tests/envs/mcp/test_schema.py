"""MCP tools without a server: schemas as the model sees them, argument checks, result texts,
the protocol's turn checks, configs and the missing-extra error."""

from __future__ import annotations

import sys

import pytest

from agentrl._optional import MissingExtraError
from agentrl.envs.mcp import McpServer, McpSession, McpTool, McpTools
from agentrl.envs.mcp.results import clip, result_text
from agentrl.tools import ToolArgumentError
from agentrl.types import ParseErrorKind, ToolCall
from tests.envs.mcp.conftest import CalcEnv

pytest.importorskip("mcp")

SEARCH = McpTool(
    name="search",
    description="Search the index.",
    input_schema={
        "type": "object",
        "title": "searchArguments",
        "properties": {
            "query": {"type": "string", "title": "Query"},
            "limit": {"type": "integer", "minimum": 1, "default": 5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {"$ref": "#/$defs/Where"},
            "title": {"type": "string"},
        },
        "required": ["query"],
        "$defs": {
            "Where": {
                "type": "object",
                "title": "Where",
                "properties": {"field": {"type": "string"}},
                "required": ["field"],
            }
        },
    },
)
SERVER = McpServer.http("http://127.0.0.1:9/mcp", name="index")


def call(**arguments: str) -> ToolCall:
    return ToolCall(name="search", arguments=arguments)


def test_schema_is_an_openai_function_without_generated_titles() -> None:
    schema = SEARCH.schema
    assert schema["type"] == "function"
    function = schema["function"]
    assert isinstance(function, dict)
    assert function["name"] == "search" and function["description"] == "Search the index."
    parameters = function["parameters"]
    assert isinstance(parameters, dict)
    assert "title" not in parameters and parameters["required"] == ["query"]
    properties = parameters["properties"]
    assert isinstance(properties, dict)
    assert properties["query"] == {"type": "string"}
    assert properties["title"] == {"type": "string"}  # a property called title is kept
    assert SEARCH.input_schema["title"] == "searchArguments"  # the original is untouched


def test_arguments_are_decoded_by_their_schema_and_validated() -> None:
    values = SEARCH.arguments(
        call(query="42", limit="3", tags='["a", "b"]', where='{"field": "x"}', title="t")
    )
    assert values == {
        "query": "42",  # a string parameter keeps the text, even when it looks like JSON
        "limit": 3,
        "tags": ["a", "b"],
        "where": {"field": "x"},
        "title": "t",
    }
    with pytest.raises(ToolArgumentError) as missing:
        SEARCH.arguments(call(limit="0", lmit="3", where="{}"))
    text = str(missing.value)
    assert "query: missing required argument" in text
    assert "lmit: unknown argument (this tool takes: query, limit, tags, where, title)" in text
    assert "limit: 0 is less than the minimum of 1" in text
    assert "where.field: missing required argument" in text
    with pytest.raises(ToolArgumentError, match=r"limit: 'many' is not of type 'integer'"):
        SEARCH.arguments(call(query="q", limit="many"))
    assert SEARCH.arguments(call(query="q", extra="1"), forbid_unknown=False)["extra"] == "1"


def test_additional_properties_in_the_schema_decide_unknown_arguments() -> None:
    open_schema = McpTool("kv", input_schema={"type": "object", "additionalProperties": True})
    assert open_schema.arguments(ToolCall("kv", {"any": "1"})) == {"any": "1"}  # no schema
    typed = McpTool(
        "kv", input_schema={"type": "object", "additionalProperties": {"type": "integer"}}
    )
    assert typed.arguments(ToolCall("kv", {"any": "1"})) == {"any": 1}
    with pytest.raises(ToolArgumentError, match="any: 'x' is not of type 'integer'"):
        typed.arguments(ToolCall("kv", {"any": "x"}))
    closed = McpTool(
        "kv",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": False,
        },
    )
    with pytest.raises(ToolArgumentError, match="b: unknown argument"):
        closed.arguments(ToolCall("kv", {"a": "x", "b": "y"}), forbid_unknown=False)


def test_an_invalid_input_schema_is_named() -> None:
    with pytest.raises(ValueError, match="tool 'bad': invalid inputSchema"):
        McpTool(
            "bad", input_schema={"type": "object", "properties": {"a": {"type": 3}}}
        ).check_schema()
    with pytest.raises(ValueError, match="must describe an object"):
        McpTool("bad", input_schema={"type": "string"}).check_schema()


def test_protocol_checks_calls_of_server_and_local_tools() -> None:
    tools = McpTools(SERVER, (SEARCH,), "system", local=CalcEnv.function_tools(), max_calls=2)
    names = [t["function"]["name"] for t in tools.tools]  # type: ignore[index]
    assert names == ["search", "submit"]
    ok = tools.check_calls([tools.call("search", query="x"), tools.call("submit", answer=3)])
    assert ok.ok and [c.name for c in ok.calls] == ["search", "submit"]
    bad = tools.check_calls([tools.call("search", query="x"), tools.call("submit", answer="x")])
    assert bad.error is not None and bad.error.kind is ParseErrorKind.INVALID_ARGUMENTS
    assert bad.error.detail.startswith("call 2 (submit): answer:")
    unknown = tools.check_calls([tools.call("lookup", query="x")])
    assert unknown.error is not None and unknown.error.kind is ParseErrorKind.UNKNOWN_TOOL
    assert "known: search, submit" in unknown.error.detail
    many = tools.check_calls([tools.call("search", query="x")] * 3)
    assert many.error is not None and many.error.kind is ParseErrorKind.MULTIPLE_CALLS
    parsed = tools.parse(tools.call_text(tools.call("search", query="x", limit=2)))
    assert parsed.ok and parsed.calls[0].arguments == {"query": "x", "limit": "2"}
    with pytest.raises(ValueError, match=r"\['submit'\] named twice"):
        McpTools(SERVER, (McpTool("submit"),), "system", local=CalcEnv.function_tools())


def test_result_texts_of_every_content_kind() -> None:
    from mcp_types import (
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    mixed = CallToolResult(
        content=[
            ImageContent(data="aGVsbG8=", mime_type="image/png"),
            ResourceLink(uri="file:///a.txt", name="a"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///b", text="inside")),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///c", blob="aGk=", mime_type="x/y")
            ),
        ],
        structured_content={"k": 1},
    )
    assert result_text(mixed).text.splitlines() == [
        "[image image/png, 5 bytes]",
        "[resource link file:///a.txt (a)]",
        "inside",
        "[resource file:///c x/y, 2 bytes]",
    ]
    only_json = result_text(CallToolResult(content=[], structured_content={"b": [1], "a": "é"}))
    assert only_json.text == '{"a": "é", "b": [1]}' and only_json.structured == {"b": [1], "a": "é"}
    failed = result_text(CallToolResult(content=[TextContent(text="no such row")], is_error=True))
    assert failed.is_error and failed.output == "Error: no such row"
    assert clip("abcdef", 4) == "abcd\n[... 2 more characters cut]" and clip("ab", 4) == "ab"


def test_server_configs_are_checked() -> None:
    server = McpServer.stdio("python3", "-m", "srv", env={"K": "v"})
    assert server.name == "python3" and server.args == ("-m", "srv")
    assert server.describe() == "'python3' (command: python3 -m srv)"
    assert SERVER.describe() == "'index' (url: http://127.0.0.1:9/mcp)"
    with pytest.raises(ValueError, match="exactly one of"):
        McpServer(command="x", url="http://h/mcp")
    with pytest.raises(ValueError, match="http"):
        McpServer.http("ftp://h/mcp")
    with pytest.raises(ValueError, match="call_timeout"):
        McpServer.stdio("x", call_timeout=0)


async def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'agentrl\[mcp\]'"):
        await McpSession.open(McpServer.stdio("true"))
