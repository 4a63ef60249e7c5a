"""Tools from typed functions: schemas from annotations and docstrings, argument validation."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel

from agentrl.tools import FunctionTool, ToolArgumentError, tool
from agentrl.types import ToolCall


class Point(BaseModel):
    """A point."""

    x: int
    y: int = 0


@tool
def everything(
    text: str,
    count: int,
    ratio: float = 0.5,
    flag: bool = False,
    mode: Literal["fast", "slow"] = "fast",
    items: list[int] | None = None,
    point: Point | None = None,
) -> str:
    """Use every supported type.

    A second paragraph that is not part of the description.

    Args:
        text: Some text,
            on two lines.
        count (int): How many.
        mode: Which mode.
    """
    return json.dumps([text, count, ratio, flag, mode, items, point and point.model_dump()])


def parameters(t: FunctionTool) -> dict[str, object]:
    function = t.schema["function"]
    assert isinstance(function, dict)
    params = function["parameters"]
    assert isinstance(params, dict)
    return params


def test_schema_of_every_supported_type() -> None:
    schema = everything.schema
    assert json.loads(json.dumps(schema)) == schema  # plain JSON
    function = schema["function"]
    assert isinstance(function, dict)
    assert function["name"] == "everything"
    assert function["description"] == "Use every supported type."
    params = parameters(everything)
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["text", "count"]
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["text"] == {"type": "string", "description": "Some text, on two lines."}
    assert props["count"] == {"type": "integer", "description": "How many."}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["flag"] == {"type": "boolean", "default": False}
    assert props["mode"] == {
        "type": "string",
        "enum": ["fast", "slow"],
        "default": "fast",
        "description": "Which mode.",
    }
    assert props["items"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
        "default": None,
    }
    assert props["point"] == {
        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
        "default": None,
    }
    defs = params["$defs"]
    assert isinstance(defs, dict)
    assert defs["Point"] == {
        "type": "object",
        "description": "A point.",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert "title" not in json.dumps(schema)


def test_a_property_named_title_is_kept() -> None:
    @tool
    def book(title: str) -> str:
        """Find a book."""
        return title

    props = parameters(book)["properties"]
    assert isinstance(props, dict) and props["title"] == {"type": "string"}


def test_arguments_are_decoded_per_schema_and_defaults_filled() -> None:
    call = ToolCall(
        "everything",
        {"text": "42", "count": "7", "flag": "true", "items": "[1, 2]", "point": '{"x": 3}'},
    )
    out = json.loads(asyncio.run(everything.invoke(call)))
    assert out == ["42", 7, 0.5, True, "fast", [1, 2], {"x": 3, "y": 0}]
    built = everything.call(text="a", count=2, items=[5])
    assert built.arguments == {"text": "a", "count": "2", "items": "[5]"}
    assert json.loads(asyncio.run(everything.invoke(built)))[5] == [5]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"count": "1"}, "text: Field required"),
        ({"text": "a", "count": "many"}, "count: Input should be a valid integer"),
        ({"text": "a", "count": "1", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ({"text": "a", "count": "1", "mode": "medium"}, "mode: Input should be 'fast' or 'slow'"),
        ({"text": "a", "count": "1", "items": "[1, 'x']"}, "items"),
        ({"text": "a", "count": "1", "point": '{"y": 1}'}, "point.x: Field required"),
    ],
)
def test_validation_errors_carry_the_schema_message(
    arguments: dict[str, str], message: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        everything.validate(ToolCall("everything", arguments))
    assert message in str(info.value)


def test_async_and_sync_methods_bind_to_their_instance() -> None:
    class Counter:
        def __init__(self, start: int) -> None:
            self.value = start

        @tool
        def add(self, amount: int) -> int:
            """Add to the counter."""
            self.value += amount
            return self.value

        @tool(name="read_counter", description="Read it.")
        async def read(self) -> str:
            await asyncio.sleep(0)
            return f"value={self.value}"

    a, b = Counter(1), Counter(10)
    assert asyncio.run(a.add.invoke(ToolCall("add", {"amount": "2"}))) == 3
    assert b.value == 10
    assert Counter.read.name == "read_counter" and Counter.read.description == "Read it."
    assert asyncio.run(b.read.invoke(ToolCall("read_counter", {}))) == "value=10"
    with pytest.raises(TypeError, match="method"):
        asyncio.run(Counter.add.invoke(ToolCall("add", {"amount": "1"})))


def test_missing_annotation_is_a_clear_error() -> None:
    def bad(x) -> str:  # type: ignore[no-untyped-def]
        return str(x)

    with pytest.raises(TypeError, match="parameter 'x' has no type annotation"):
        tool(bad)
