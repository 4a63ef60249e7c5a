"""Tools from typed Python functions: the JSON schema from the signature, pydantic validation.

    @tool
    async def search(query: str, limit: int = 5) -> str:
        '''Search the index.

        Args:
            query: What to look for.
            limit: How many hits to return.
        '''

`tool` (a decorator, also usable on methods) builds a `FunctionTool`: its name is the
function's, its description the docstring's first paragraph, and its parameters the JSON schema
pydantic derives from the annotations (str, int, float, bool, Literal, lists, dicts, optional
values, pydantic models), with each `Args:` line as the parameter's description and defaults
kept. Arguments arrive as the texts a dialect read (`ToolCall.arguments`); each is used as the
string it is when the parameter accepts that, else decoded as JSON, then the whole call is
validated (unknown, missing and mistyped arguments are errors carrying pydantic's message).
Sync and async functions both work; a sync function runs in the event loop, so keep it quick
(make a slow tool async).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from agentrl.core.types import JsonObject, JsonValue, ToolCall

__all__ = ["FunctionTool", "ToolArgumentError", "strip_titles", "tool"]

_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTIONS = ("args:", "arguments:", "parameters:", "returns:", "raises:", "yields:", "example")


class ToolArgumentError(ValueError):
    """A call's arguments do not match the tool's schema (the text says what is wrong)."""


def _docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) of a Google-style docstring."""
    text = inspect.cleandoc(doc or "")
    paragraphs: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in text.splitlines():
        lowered = line.strip().lower()
        if any(lowered.startswith(s) for s in _SECTIONS) and not line.startswith(" "):
            section, current = lowered.rstrip(":"), None
            continue
        if section is None:
            paragraphs.append(line)
        elif section in ("args", "arguments", "parameters"):
            match = _ARG_LINE.match(line)
            if match and line.startswith("    ") and not line.startswith("        "):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    first = "\n".join(paragraphs).strip().split("\n\n", 1)[0]
    return " ".join(first.split()), params


def strip_titles(schema: JsonValue) -> JsonValue:
    """The schema without generated `title` keywords (pydantic's, MCP servers'); a property
    called `title` is kept."""
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, JsonValue] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = strip_titles(value)
    return out


def _format_errors(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


@dataclass(frozen=True)
class FunctionTool:
    """A tool built from a typed function: name, description, argument model and schema.

    On a class, `instance.tool_name` is the tool bound to that instance (a descriptor)."""

    name: str
    description: str
    function: Callable[..., Any]
    arguments: type[BaseModel]
    """The pydantic model of the arguments (extra arguments forbidden)."""
    method: bool = False
    """The function's first parameter is `self` (bind it with `tool.__get__(obj)`)."""
    bound: object | None = None
    _adapters: Mapping[str, TypeAdapter[Any]] = field(default_factory=dict, repr=False)

    @property
    def schema(self) -> JsonObject:
        """The tool's JSON schema (OpenAI function-calling format)."""
        parameters = strip_titles(self.arguments.model_json_schema())
        assert isinstance(parameters, dict)
        parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def __get__(self, obj: object | None, owner: type | None = None) -> FunctionTool:
        if obj is None or not self.method:
            return self
        return replace(self, bound=obj)

    def validate(self, call: ToolCall) -> BaseModel:
        """The call's arguments validated against the schema; raises `ToolArgumentError`."""
        if call.name != self.name:
            raise ToolArgumentError(f"this is tool {self.name!r}, not {call.name!r}")
        values: dict[str, object] = {}
        for key, text in call.arguments.items():
            values[key] = self._decode(key, text)
        try:
            return self.arguments.model_validate(values)
        except ValidationError as exc:
            raise ToolArgumentError(_format_errors(exc)) from None

    def _decode(self, key: str, text: str) -> object:
        adapter = self._adapters.get(key)
        if adapter is None:
            return text  # an unknown argument: validation reports it
        try:
            adapter.validate_python(text)
            return text
        except ValidationError:
            pass
        try:
            decoded: object = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return text
        return decoded

    async def invoke(self, call: ToolCall) -> object:
        """Validate the call, run the function (awaiting it when async) and return its result."""
        if self.method and self.bound is None:
            raise TypeError(f"tool {self.name!r} is a method; call it on an instance")
        model = self.validate(call)
        kwargs = {name: getattr(model, name) for name in type(model).model_fields}
        args = (self.bound,) if self.method else ()
        result = self.function(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def call(self, **arguments: JsonValue) -> ToolCall:
        """A `ToolCall` of this tool (each argument as the text a model would write)."""
        texts = {
            k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in arguments.items()
        }
        return ToolCall(name=self.name, arguments=texts)


def _build(fn: Callable[..., Any], name: str | None, description: str | None) -> FunctionTool:
    where = getattr(fn, "__qualname__", repr(fn))
    summary, docs = _docstring(fn.__doc__)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise TypeError(f"tool {where}: cannot resolve an annotation ({exc})") from None
    fields: dict[str, Any] = {}
    adapters: dict[str, TypeAdapter[Any]] = {}
    method = False
    for index, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if index == 0 and pname in ("self", "cls"):
            method = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {where}: parameter {pname!r} must be a plain named parameter")
        if pname not in hints:
            raise TypeError(
                f"tool {where}: parameter {pname!r} has no type annotation; annotate it "
                "(str, int, float, bool, Literal[...], list[...] or a pydantic model)"
            )
        default = ... if param.default is param.empty else param.default
        fields[pname] = (hints[pname], Field(default, description=docs.get(pname)))
        adapters[pname] = TypeAdapter(hints[pname])
    tool_name = name or fn.__name__
    model = create_model(  # type: ignore[call-overload]
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return FunctionTool(
        name=tool_name,
        description=description if description is not None else summary,
        function=fn,
        arguments=model,
        method=method,
        _adapters=adapters,
    )


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a `FunctionTool` of a typed function or method (`@tool` or `@tool(name=...)`).

    Every parameter needs an annotation; a missing one raises TypeError naming it."""
    if fn is not None:
        return _build(fn, name, description)

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        return _build(function, name, description)

    return decorate
