"""Errors every backend raises in the same shape (no runtime dependency)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CheckpointError", "HostFeatureMissing"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, cut or malformed; `path` names the file."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class HostFeatureMissing(RuntimeError):
    """This machine lacks a system feature a component needs (a program, a kernel feature); the
    message names what is missing, how to get it and any explicit way around it."""
