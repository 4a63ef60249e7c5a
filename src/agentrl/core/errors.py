"""Errors every backend raises in the same shape (no runtime dependency)."""

from __future__ import annotations

import traceback
from pathlib import Path

__all__ = ["CheckpointError", "HostFeatureMissing", "ToolInfraError", "describe_exception"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, cut or malformed; `path` names the file."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class HostFeatureMissing(RuntimeError):
    """This machine lacks a system feature a component needs (a program, a kernel feature); the
    message names what is missing, how to get it and any explicit way around it."""


class ToolInfraError(RuntimeError):
    """Raised by a tool when the failure is the infrastructure's, not the policy's (a database
    connection lost, a service down): the branch ends as `env_error`, which is left out of its
    group's statistics, instead of the call counting as the model's invalid action."""


def describe_exception(exc: BaseException, frames: int = 3) -> str:
    """`Type: message (at file:line in function <- ...)`: the exception and the last `frames`
    frames of its traceback, innermost first, for error records that must say where."""
    text = f"{type(exc).__name__}: {exc}"
    stack = traceback.extract_tb(exc.__traceback__)[-frames:] if frames > 0 else []
    if not stack:
        return text
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(stack))
    return f"{text} (at {where})"
