"""JSONL writer / reader: never overwrite, flush per record, survive a crash mid-write."""

from __future__ import annotations

import os
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


def test_drop_records_truncates_in_place_so_an_open_writer_goes_on(tmp_path: Path) -> None:
    from agentrl.reporting.jsonl import drop_records

    path = tmp_path / "m.jsonl"
    path.write_text("".join(f'{{"step": {i}}}\n' for i in range(1, 6)) + '{"step": 6, "ti')
    with pytest.warns(UserWarning, match="incomplete last record"):
        writer = JsonlWriter(path, WriteMode.APPEND)  # repairs the cut line
    assert drop_records(path, lambda r: int(r["step"]) > 3) == 2  # type: ignore[arg-type]
    writer.write({"step": 4})
    writer.close()
    assert [r["step"] for r in read_jsonl(path)] == [1, 2, 3, 4]
    assert drop_records(path, lambda r: r["step"] == 2) == 1  # not a tail: rewritten
    assert [r["step"] for r in read_jsonl(path)] == [1, 3, 4]


def test_append_records_never_appends_onto_a_cut_line(tmp_path: Path) -> None:
    from agentrl.records import TrajectoryRecord, append_records, read_records
    from agentrl.reporting.records import episode_record
    from tests.helpers.reporting_helpers import make_trajectory

    path = tmp_path / "rollouts.jsonl"
    record = TrajectoryRecord.from_trajectory(make_trajectory("t-1"))
    append_records(path, [record])
    with path.open("a") as handle:
        handle.write(record.to_json()[:30])  # a crash mid-write
    with pytest.warns(UserWarning, match="dropping an incomplete last record"):
        append_records(path, [record, record])
    assert len(list(read_records(path))) == 3
    assert episode_record(record)["type"] == "episode"


def test_a_lock_refuses_a_second_holder_and_takes_over_a_dead_ones(tmp_path: Path) -> None:
    from agentrl.reporting.lock import OutputInUseError, OutputLock, check_not_in_use

    target = tmp_path / "e.jsonl"
    target.with_name("e.jsonl.lock").write_text("999999999\n")  # left by a dead process
    with OutputLock(target) as lock:
        assert lock.held
        assert lock.path.read_text().strip() == str(os.getpid())
        with pytest.raises(OutputInUseError, match=rf"in use by process {os.getpid()}"):
            OutputLock(target).acquire()
        with pytest.raises(OutputInUseError, match=r"e\.jsonl"):
            check_not_in_use(target)
    assert not lock.path.exists()
    check_not_in_use(target)
