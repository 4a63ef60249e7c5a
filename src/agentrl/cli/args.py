"""Command-line flags generated from the pydantic configs, so flags and fields never drift.

Every field `some_name` becomes `--some-name` with the field's description as help; booleans
get `--name / --no-name`; enums list their choices. Values are parsed and validated by the
pydantic model, and a validation error is reported against the flag that caused it.
"""

from __future__ import annotations

import argparse
import enum
import types
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = [
    "ConfigArgumentError",
    "Subparsers",
    "UsageError",
    "add_config_arguments",
    "config_from_args",
    "flag_name",
]

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction
"""What each command's `add_parser(subparsers)` registers its parser with."""

M = TypeVar("M", bound=BaseModel)


class UsageError(Exception):
    """A problem the user can fix; printed as one line (exit status 2 for flags, else 1)."""


class ConfigArgumentError(ValueError):
    """Command-line values that do not make a valid config (one line per bad flag)."""


def flag_name(field: str) -> str:
    """The command-line flag of a config field."""
    return "--" + field.replace("_", "-")


def _core_type(annotation: Any) -> Any:
    """The annotation without `None` (for optional fields)."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return options[0]
    return annotation


def _metavar(kind: Any) -> str:
    if kind is int:
        return "N"
    if kind is float:
        return "X"
    if kind is Path:
        return "PATH"
    return "TEXT"


def _default_text(info: FieldInfo) -> str:
    default = info.default
    if default is PydanticUndefined:
        return "required"
    if isinstance(default, enum.Enum):
        return str(default.value)
    return "none" if default is None else str(default)


def add_config_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    model: type[BaseModel],
    *,
    exclude: Collection[str] = (),
) -> None:
    """Add one flag per field of `model` (except `exclude`); unset flags keep model defaults."""
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        kind = _core_type(info.annotation)
        help_text = f"{info.description} (default: {_default_text(info)})"
        flag = flag_name(name)
        required = info.default is PydanticUndefined
        if kind is bool:
            parser.add_argument(
                flag,
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            parser.add_argument(
                flag,
                dest=name,
                choices=[str(m.value) for m in kind],
                default=argparse.SUPPRESS,
                required=required,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag,
                dest=name,
                metavar=_metavar(kind),
                default=argparse.SUPPRESS,
                required=required,
                help=help_text,
            )


def _location(error: Mapping[str, Any]) -> str:
    loc = error.get("loc") or ()
    if loc and isinstance(loc[0], str):
        return flag_name(loc[0])
    return "config"


def config_from_args(model: type[M], namespace: argparse.Namespace, **overrides: object) -> M:
    """Build `model` from the flags given on the command line (plus `overrides`)."""
    values: dict[str, object] = {
        name: getattr(namespace, name) for name in model.model_fields if hasattr(namespace, name)
    }
    values.update(overrides)
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            message = str(error.get("msg", "invalid value"))
            if error.get("type") == "missing":
                message = "is required"
            lines.append(f"{_location(error)}: {message}")
        raise ConfigArgumentError("\n".join(lines)) from None
