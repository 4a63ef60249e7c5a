"""`agentrl plot`: numbers behind the charts, and real PNG files."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from agentrl.reporting.plots import PlotError, plot_eval_files, run_points
from agentrl.reporting.records import read_eval_file
from tests.helpers.reporting_helpers import TASK_TYPES, standard_set, write_eval_file


@pytest.fixture
def three_runs(tmp_path: Path) -> list[Path]:
    return [
        write_eval_file(tmp_path / "base.jsonl", "base", standard_set([1, 0, 0, 0, 0, 0])),
        write_eval_file(tmp_path / "u40.jsonl", "update 40", standard_set([1, 1, 0, 1, 0, 0])),
        # an interrupted evaluation: no summary records, summarized from its episodes
        write_eval_file(
            tmp_path / "u80.jsonl", "update 80", standard_set([1, 1, 1, 1, 1, 0]), summaries=False
        ),
    ]


def test_run_points_hand_computed(three_runs: list[Path]) -> None:
    points = run_points([read_eval_file(p) for p in three_runs])
    assert [p.label for p in points] == ["base", "update 40", "update 80"]
    assert points[0].success == pytest.approx(
        {"valid_seen": 1 / 3, "valid_unseen": 0.0, "overall": 1 / 6}
    )
    assert points[1].success == pytest.approx(
        {"valid_seen": 2 / 3, "valid_unseen": 1 / 3, "overall": 0.5}
    )
    assert points[2].success["overall"] == pytest.approx(5 / 6)
    assert points[2].games == {"valid_seen": 3, "valid_unseen": 3, "overall": 6}
    # task type i%3: games 0 and 3 are TASK_TYPES[0], 1 and 4 TASK_TYPES[1], 2 and 5 [2]
    assert points[1].task_success == pytest.approx(
        {TASK_TYPES[0]: 1.0, TASK_TYPES[1]: 0.5, TASK_TYPES[2]: 0.0}
    )
    assert points[0].mean_invalid_actions == pytest.approx(1.0)
    assert points[1].reward_mean == pytest.approx(0.5 - 0.1)


def test_labels_override_and_duplicates(three_runs: list[Path], tmp_path: Path) -> None:
    files = [read_eval_file(p) for p in three_runs]
    assert [p.label for p in run_points(files, ["a", "b", "c"])] == ["a", "b", "c"]
    twice = run_points([files[0], files[0]])
    assert twice[0].label != twice[1].label
    with pytest.raises(PlotError, match="2 labels for 3 files"):
        run_points(files, ["a", "b"])


def test_plot_writes_real_pngs_and_csv(three_runs: list[Path], tmp_path: Path) -> None:
    written = plot_eval_files(three_runs, tmp_path / "plots")
    assert [p.name for p in written] == [
        "success_by_split.png",
        "success_vs_invalid.png",
        "task_types.png",
        "comparison.csv",
    ]
    for png in written[:3]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = imread(png)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 300
        assert float(np.std(pixels[..., :3])) > 0.05  # not a blank canvas
    rows = list(csv.DictReader(written[3].open()))
    assert [r["label"] for r in rows] == ["base", "update 40", "update 80"]
    assert float(rows[1]["success_overall"]) == pytest.approx(0.5)
    assert rows[2]["games_valid_unseen"] == "3"


def test_plot_without_anything_to_plot_fails_clearly(tmp_path: Path) -> None:
    empty = write_eval_file(tmp_path / "empty.jsonl", "empty", [], summaries=False)
    with pytest.raises(PlotError, match=r"empty\.jsonl: no episodes"):
        plot_eval_files([empty], tmp_path / "plots")
    with pytest.raises(PlotError, match="at least one"):
        plot_eval_files([], tmp_path / "plots")
