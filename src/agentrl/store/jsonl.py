"""Crash-safe JSON Lines files: append + flush per record, never silently overwritten.

A process killed mid-write leaves at most one incomplete last line. `read_jsonl` skips such
a tail (with a warning) and `JsonlWriter` in append mode removes it before writing, so an
interrupted file can be resumed. A malformed line anywhere else is an error naming the file
and the line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import warnings
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from agentrl.core.types import JsonObject

__all__ = [
    "JsonlError",
    "JsonlWriter",
    "WriteMode",
    "drop_records",
    "named_os_error",
    "numbered_jsonl",
    "read_jsonl",
]


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


def named_os_error(exc: OSError, path: Path, doing: str) -> OSError:
    """The same OSError, with a message that names the path and what to do."""
    reason = exc.strerror or str(exc)
    hint = ""
    if exc.errno == errno.ENOSPC:
        hint = "; free some space (or choose another folder) and resume"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "; check the folder's permissions or choose another path"
    return type(exc)(exc.errno, f"{doing} {path}: {reason}{hint}")


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
        try:
            self._handle: IO[str] | None = self.path.open(flags, encoding="utf-8")
        except IsADirectoryError:
            raise IsADirectoryError(f"{self.path} is a folder, not a file") from None

    def write(self, record: JsonObject) -> None:
        """Append one record and flush it to the operating system."""
        self.write_line(json.dumps(record, ensure_ascii=False, allow_nan=False))

    def write_line(self, line: str) -> None:
        """Append one already-serialised JSON object (one line, no newline) and flush it.

        A failed write (a full disk, a revoked permission) raises `OSError` naming the file;
        what reached the disk is at most a cut last line, which the next open drops.
        """
        if self._handle is None:
            raise ValueError(f"{self.path}: writer is closed")
        if "\n" in line:
            raise ValueError(f"{self.path}: a JSONL record must be one line")
        try:
            self._handle.write(line + "\n")
            self._handle.flush()
            if self._fsync:
                os.fsync(self._handle.fileno())
        except OSError as exc:
            self._abandon()
            raise named_os_error(exc, self.path, "cannot write to") from exc

    def sync(self) -> None:
        """Force what was written to the disk (`os.fsync`)."""
        if self._handle is None:
            raise ValueError(f"{self.path}: writer is closed")
        try:
            os.fsync(self._handle.fileno())
        except OSError as exc:
            self._abandon()
            raise named_os_error(exc, self.path, "cannot write to") from exc

    def _abandon(self) -> None:
        """Close after a failed write without flushing the rest of the buffer again."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()

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
    return [record for _, record in numbered_jsonl(path)]


def numbered_jsonl(path: Path) -> list[tuple[int, JsonObject]]:
    """(line number, record) of every record of a JSON Lines file (`read_jsonl`'s rules)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        where = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise JsonlError(
            f"{path}:{where}: not UTF-8 text (byte {exc.start}); is this a JSONL file written "
            "by agentrl?"
        ) from None
    lines = text.split("\n")
    records: list[tuple[int, JsonObject]] = []
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
        records.append((number, value))
    return records


def drop_records(path: Path, drop: Callable[[JsonObject], bool]) -> int:
    """Remove the records `drop` selects from a JSONL file; returns how many.

    Kept lines stay byte for byte; a cut last line is dropped too. When everything removed
    comes after everything kept (records of the updates after a checkpoint), the file is
    truncated in place, so a writer appending to it keeps working; otherwise it is rewritten
    atomically (temporary file + rename). A missing file is 0.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = iter(read_jsonl(path))
    kept: list[bytes] = []
    dropped, cut_at, offset, tail_only = 0, None, 0, True
    for raw in path.read_bytes().split(b"\n"):
        line_start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        try:
            json.loads(raw)
        except ValueError:  # the cut last line (read_jsonl raised for any other)
            cut_at = line_start if cut_at is None else cut_at
            continue
        if drop(next(records)):
            dropped += 1
            cut_at = line_start if cut_at is None else cut_at
        else:
            kept.append(raw)
            tail_only = tail_only and cut_at is None
    if cut_at is None:
        return 0
    try:
        if tail_only:
            os.truncate(path, cut_at)
        else:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(b"".join(line + b"\n" for line in kept))
            os.replace(tmp, path)
    except OSError as exc:
        raise named_os_error(exc, path, "cannot rewrite") from exc
    return dropped
