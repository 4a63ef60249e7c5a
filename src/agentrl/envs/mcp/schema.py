"""`McpTool`: one tool a server lists, as the model sees it (an OpenAI-style function schema)
and as its calls are checked (the arguments decoded and validated against its inputSchema).

Arguments arrive as the texts a dialect read (`ToolCall.arguments`). Each is kept as the string
it is when its property's schema accepts that string, else decoded as JSON (`3`, `true`,
`["a"]`), as `agentrl.tools.functions` does for local tools; then the whole object is validated
with `jsonschema` (a dependency of the `mcp` SDK). An argument the schema does not name is
rejected unless the schema allows extra properties explicitly (`additionalProperties` or
`patternProperties`): a misspelt argument would otherwise be ignored silently by most servers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentrl._optional import require
from agentrl.core.types import JsonObject, JsonValue, ToolCall
from agentrl.envs.mcp.config import EXTRA
from agentrl.tools.functions import ToolArgumentError, strip_titles

__all__ = ["McpTool", "strip_titles"]

_MESSAGE_CHARS = 200


def _validator_class(schema: JsonObject) -> Any:
    jsonschema = require("jsonschema", EXTRA, "checking MCP tool arguments")
    return jsonschema.validators.validator_for(schema)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "..."


@dataclass(frozen=True)
class McpTool:
    """One tool of an MCP server: name, description and JSON schema of its arguments."""

    name: str
    description: str = ""
    input_schema: JsonObject = field(default_factory=lambda: {"type": "object", "properties": {}})
    """The server's inputSchema (a JSON schema of an object)."""

    @property
    def properties(self) -> Mapping[str, JsonValue]:
        """The schema's named arguments."""
        properties = self.input_schema.get("properties")
        return properties if isinstance(properties, dict) else {}

    @property
    def schema(self) -> JsonObject:
        """The tool's OpenAI-style function schema (what the chat template shows the model)."""
        parameters = strip_titles(self.input_schema)
        assert isinstance(parameters, dict)
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def check_schema(self) -> None:
        """Raise ValueError when the inputSchema is not a valid JSON schema of an object."""
        if self.input_schema.get("type", "object") != "object":
            raise ValueError(f"tool {self.name!r}: inputSchema must describe an object")
        jsonschema = require("jsonschema", EXTRA, "checking MCP tool arguments")
        try:
            _validator_class(self.input_schema).check_schema(self.input_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"tool {self.name!r}: invalid inputSchema: {exc.message}") from None

    @cached_property
    def _validator(self) -> Any:
        return _validator_class(self.input_schema)(self.input_schema)

    @cached_property
    def _property_validators(self) -> dict[str, Any]:
        """One validator per argument; each keeps the root's `$defs` so `$ref`s resolve."""
        shared = {k: v for k, v in self.input_schema.items() if k in ("$defs", "definitions")}
        validators: dict[str, Any] = {}
        for name, sub in self.properties.items():
            if isinstance(sub, dict):
                document: JsonObject = {**shared, **sub}
                validators[name] = _validator_class(self.input_schema)(document)
        return validators

    @cached_property
    def _extra_validator(self) -> Any:
        """The validator of arguments the schema does not name (`additionalProperties`)."""
        extra = self.input_schema.get("additionalProperties")
        if not isinstance(extra, dict):
            return None
        shared = {k: v for k, v in self.input_schema.items() if k in ("$defs", "definitions")}
        return _validator_class(self.input_schema)({**shared, **extra})

    def _forbids_unknown(self, forbid_unknown: bool) -> bool:
        """Whether an argument the schema does not name is an error: always when the schema
        says `additionalProperties: false`; with `forbid_unknown`, also when it says nothing."""
        schema = self.input_schema
        extra = schema.get("additionalProperties")
        if extra is False:
            return True
        return forbid_unknown and extra is None and "patternProperties" not in schema

    def _decode(self, key: str, text: str) -> JsonValue:
        validator = self._property_validators.get(key, self._extra_validator)
        if validator is None:
            return text  # no schema: the text as it is
        try:
            if validator.is_valid(text):
                return text
        except Exception:  # an unresolvable $ref: let JSON decoding and validation decide
            pass
        try:
            decoded: JsonValue = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return text
        return decoded

    def arguments(self, call: ToolCall, *, forbid_unknown: bool = True) -> dict[str, JsonValue]:
        """The call's arguments decoded and validated against the inputSchema; raises
        `ToolArgumentError` naming every problem (missing, mistyped, unknown)."""
        if call.name != self.name:
            raise ToolArgumentError(f"this is tool {self.name!r}, not {call.name!r}")
        values = {key: self._decode(key, text) for key, text in call.arguments.items()}
        problems: list[str] = []
        if self._forbids_unknown(forbid_unknown):
            known = ", ".join(self.properties) or "no arguments"
            for key in values:
                if key not in self.properties:
                    problems.append(f"{key}: unknown argument (this tool takes: {known})")
        errors = sorted(self._validator.iter_errors(values), key=lambda e: str(e.absolute_path))
        for error in errors:
            where = ".".join(str(part) for part in error.absolute_path)
            if error.validator == "required" and isinstance(error.instance, dict):
                prefix = f"{where}." if where else ""
                absent = [k for k in error.validator_value if k not in error.instance]
                problems.extend(f"{prefix}{k}: missing required argument" for k in absent)
                continue
            if error.validator == "additionalProperties" and problems:
                continue  # already named as unknown arguments
            problems.append(f"{where or 'arguments'}: {_short(str(error.message))}")
        if problems:
            raise ToolArgumentError("; ".join(dict.fromkeys(problems)))
        return values
