"""Crash-safe JSON Lines files: append + flush per record, never silently overwritten.

A process killed mid-write leaves at most one incomplete last line. `read_jsonl` skips such
a tail (with a warning) and `JsonlWriter` in append mode removes it before writing, so an
interrupted file can be resumed. A malformed line anywhere else is an error naming the file
and the line.
"""

from __future__ import annotations

import json
import os
import warnings
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from agentrl.types import JsonObject

__all__ = ["JsonlError", "JsonlWriter", "WriteMode", "read_jsonl"]


class JsonlError(ValueError):
    """A JSON Lines file is malformed (names the file and line)."""


class WriteMode(StrEnum):
    """How `JsonlWriter` treats an existing file."""

    CREATE = "create"
    """Refuse if the file exists."""
    APPEND = "append"
    """Add records at the end (create the file if absent)."""
    OVERWRITE = "overwrite"
    """Start the file afresh (explicitly asked for)."""


def _repair_tail(path: Path) -> None:
    """Drop an incomplete last line (a record cut by a crash); keep a complete one."""
    with path.open("rb+") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        start = data.rfind(b"\n") + 1
        tail = data[start:]
        try:
            json.loads(tail)
        except ValueError:
            warnings.warn(
                f"{path}: dropping an incomplete last record ({len(tail)} bytes) left by an "
                "interrupted write",
                stacklevel=3,
            )
            handle.seek(start)
            handle.truncate()
        else:
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")


class JsonlWriter:
    """Writes one JSON object per line, flushed (and optionally fsynced) after each record."""

    def __init__(
        self, path: Path, mode: WriteMode = WriteMode.CREATE, *, fsync: bool = False
    ) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if mode is WriteMode.CREATE and self.path.exists():
            raise FileExistsError(
                f"{self.path} already exists; refusing to overwrite it (choose another output, "
                "resume it, or ask for it to be overwritten)"
            )
        if mode is WriteMode.APPEND and self.path.exists():
            _repair_tail(self.path)
        flags = {WriteMode.CREATE: "x", WriteMode.APPEND: "a", WriteMode.OVERWRITE: "w"}[mode]
        self._handle: IO[str] | None = self.path.open(flags, encoding="utf-8")

    def write(self, record: JsonObject) -> None:
        """Append one record and flush it to the operating system."""
        if self._handle is None:
            raise ValueError(f"{self.path}: writer is closed")
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        self._handle.write(line + "\n")
        self._handle.flush()
        if self._fsync:
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_jsonl(path: Path) -> list[JsonObject]:
    """Every record of a JSON Lines file; an incomplete last line (crash) is skipped."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    records: list[JsonObject] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            if number == len(lines):  # no newline after it: a write cut by a crash
                warnings.warn(f"{path}:{number}: skipping an incomplete last record", stacklevel=2)
                continue
            raise JsonlError(f"{path}:{number}: not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise JsonlError(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
        records.append(value)
    return records
