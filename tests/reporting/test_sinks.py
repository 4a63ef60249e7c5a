"""Metric sinks: JSONL and console."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentrl.config import SwanLabMode
from agentrl.metrics import eval_summaries, update_metrics
from agentrl.reporting.jsonl import read_jsonl
from agentrl.reporting.sinks import (
    SUMMARY_COLUMNS,
    ConsoleSink,
    JsonlSink,
    MultiSink,
    format_table,
    make_sinks,
)
from agentrl.testing import synthetic_group
from tests.helpers.reporting_helpers import standard_set


def _update(n: int) -> object:
    groups = [synthetic_group([1.0, 0.0], group_id="a"), synthetic_group([0.0, 0.0], seed=2)]
    return update_metrics(n, groups, loss=0.5 * n, trained_tokens=10 * n, timings={"total": 2.0})


def test_jsonl_sink_appends_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.jsonl"
    sink = JsonlSink(path)
    sink.log("train", 1, _update(1))  # type: ignore[arg-type]
    sink.close()
    again = JsonlSink(path)  # e.g. a resumed run
    again.log("train", 2, _update(2))  # type: ignore[arg-type]
    again.close()
    records = read_jsonl(path)
    assert [(r["type"], r["step"], r["loss"]) for r in records] == [
        ("train", 1, 0.5),
        ("train", 2, 1.0),
    ]
    stats = records[0]["stats"]
    assert isinstance(stats, dict)
    assert stats["success_rate"] == pytest.approx(0.25)
    assert records[0]["degenerate_groups"] == 1


def test_console_sink_prints_a_table(tmp_path: Path) -> None:
    stream = io.StringIO()
    sink = ConsoleSink(stream=stream, header_every=2)
    for n in (1, 2, 3):
        sink.log("train", n, _update(n))  # type: ignore[arg-type]
    sink.log("eval/valid_seen", 3, _update(3))  # type: ignore[arg-type]  (not shown)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5  # header, 2 rows, header, row
    assert lines[0].split() == [
        "update",
        "success",
        "reward",
        "invalid",
        "steps",
        "trunc",
        "degen",
        "loss",
        "tokens",
        "kl",
        "sec",
        "errors",
    ]
    row = lines[1].split()
    assert row[0] == "1"
    assert row[1] == "25.0%"
    assert row[6] == "1"
    assert row[7] == "+0.5000"
    assert lines[4].split()[8] == "30"


def test_format_table_of_summaries() -> None:
    summaries = eval_summaries(standard_set([True, False, True, False, False, False]))
    table = format_table(summaries, SUMMARY_COLUMNS)
    lines = table.splitlines()
    assert lines[0].split()[0] == "split"
    assert [line.split()[0] for line in lines[2:]] == ["valid_seen", "valid_unseen", "overall"]
    assert lines[2].split()[2] == "66.67%"
    assert lines[4].split()[2] == "33.33%"
    # every game made one invalid (unparseable) call
    assert all(line.split()[-3:] == ["1.00", "0", "0"] for line in lines[2:])  # invalid, errors
    assert lines[0].split()[-2:] == ["errors", "rew.err"]


def test_make_sinks_disabled_does_not_touch_swanlab(tmp_path: Path) -> None:
    sinks = make_sinks(tmp_path / "m.jsonl", swanlab_mode=SwanLabMode.DISABLED, console=False)
    assert [type(s).__name__ for s in sinks.sinks] == ["JsonlSink"]
    sinks.log("train", 1, _update(1))  # type: ignore[arg-type]
    sinks.close()
    assert len(read_jsonl(tmp_path / "m.jsonl")) == 1


def test_multisink_closes_all_even_if_one_fails(tmp_path: Path) -> None:
    class Broken:
        closed = False

        def log(self, kind: str, step: int, record: object) -> None:
            pass

        def close(self) -> None:
            raise OSError("disk gone")

    jsonl = JsonlSink(tmp_path / "m.jsonl")
    sinks = MultiSink([Broken(), jsonl])  # type: ignore[list-item]
    with pytest.raises(OSError, match="disk gone"):
        sinks.close()
    with pytest.raises(ValueError, match="closed"):
        jsonl.log("train", 1, _update(1))  # type: ignore[arg-type]
