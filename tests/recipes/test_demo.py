"""`agentrl demo`: the whole recipe end to end (quick size on the session's generated games)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentrl.cli import main
from agentrl.demo import DEMO_SIZES, run_demo
from agentrl.reporting.records import read_eval_file

pytest.importorskip("torch")


def _check(report: Any, updates: int) -> None:
    run = report.run_dir
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, updates + 1))
    assert (run / "checkpoints" / f"update-{updates:04d}.json").is_file()
    labels = [e.label for e in report.evals]
    assert labels == ["planner", "base", f"update-{updates:04d}"]
    for outcome in report.evals:
        data = read_eval_file(outcome.path)
        assert set(data.summaries) == {"valid_seen", "valid_unseen", "overall"}
    assert {p.name for p in report.plots} >= {"success_by_split.png", "task_types.png"}
    assert all(p.stat().st_size > 0 for p in report.plots)
    html = report.viewer.read_text()
    assert report.viewer.suffix == ".html" and labels[-1] in html
    text = report.describe()
    assert str(report.viewer) in text and str(report.plots[0].parent) in text
    for outcome in report.evals:  # the label and the path stay apart, however long the label
        assert f"{outcome.label} {outcome.path}" in " ".join(text.split())


def test_quick_demo_on_generated_games(
    tmp_path: Path, alfworld_games: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick size with the smoke learning phase, which runs in its own process beside the
    ALFWorld phases: its curve is printed after them, in one piece, and its plot is written."""
    from agentrl.learning import SMOKE

    size = replace(DEMO_SIZES["quick"], learning=SMOKE)
    report = run_demo(tmp_path / "demo", size, games=alfworld_games.root, progress=False)
    _check(report, size.updates)
    printed = capsys.readouterr().out
    assert "in the background" in printed
    curve = printed.index("update   0:"), printed.index("update   1:"), printed.index("update   2:")
    assert list(curve) == sorted(curve)
    assert printed.index("warm start:") < curve[0]  # the ALFWorld phases printed first
    assert report.learning is not None and [p.update for p in report.learning.curve] == [0, 1, 2]
    assert report.learning_plot is not None and report.learning_plot.stat().st_size > 0
    assert (tmp_path / "demo" / "learning.log").is_file()
    with pytest.raises(FileExistsError, match="--overwrite"):
        run_demo(tmp_path / "demo", size, games=alfworld_games.root, progress=False)


@pytest.mark.slow
def test_make_demo_default_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What `make demo` runs: generates its own games; a few minutes on 2 CPU cores."""
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "demo finished" in printed and str(out / "plots") in printed
    assert (out / "games" / "json_2.1.1" / "valid_unseen").is_dir()
    assert main(["demo", "--out", str(out)]) == 1  # never replaced unless --overwrite
