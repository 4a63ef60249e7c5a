"""JSONL writer / reader: never overwrite, flush per record, survive a crash mid-write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.reporting.jsonl import JsonlError, JsonlWriter, WriteMode, read_jsonl


def test_create_refuses_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"a": 1}\n')
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        JsonlWriter(path)
    assert read_jsonl(path) == [{"a": 1}]


def test_append_keeps_and_overwrite_replaces(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.jsonl"
    with JsonlWriter(path) as w:
        w.write({"a": 1})
    with JsonlWriter(path, WriteMode.APPEND) as w:
        w.write({"a": 2})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    with JsonlWriter(path, WriteMode.OVERWRITE) as w:
        w.write({"b": 3})
    assert read_jsonl(path) == [{"b": 3}]


def test_each_record_is_on_disk_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    writer = JsonlWriter(path)
    writer.write({"n": 1})
    # another reader sees the record while the writer is still open
    assert read_jsonl(path) == [{"n": 1}]
    writer.write({"n": 2})
    assert len(read_jsonl(path)) == 2
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write({"n": 3})


def test_killed_writer_leaves_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    code = (
        "import os, sys\n"
        "from agentrl.reporting.jsonl import JsonlWriter\n"
        f"w = JsonlWriter(__import__('pathlib').Path({str(path)!r}))\n"
        "for i in range(3):\n"
        "    w.write({'episode': i})\n"
        'w._handle.write(\'{"episode": 3, "trun\')\n'
        "w._handle.flush()\n"
        "os._exit(9)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], check=False)
    assert result.returncode == 9
    with pytest.warns(UserWarning, match="incomplete last record"):
        assert read_jsonl(path) == [{"episode": i} for i in range(3)]
    with (
        pytest.warns(UserWarning, match="dropping an incomplete"),
        JsonlWriter(path, WriteMode.APPEND) as w,
    ):
        w.write({"episode": 3})
    assert read_jsonl(path) == [{"episode": i} for i in range(4)]


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    with JsonlWriter(path, WriteMode.APPEND) as w:
        w.write({"a": 3})
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_corruption_in_the_middle_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"a": 1}\n{oops\n{"a": 2}\n')
    with pytest.raises(JsonlError, match=r"out\.jsonl:2: not valid JSON"):
        read_jsonl(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(JsonlError, match="expected a JSON object"):
        read_jsonl(path)
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_nan_is_refused(tmp_path: Path) -> None:
    with JsonlWriter(tmp_path / "out.jsonl") as w, pytest.raises(ValueError):
        w.write({"x": float("nan")})
