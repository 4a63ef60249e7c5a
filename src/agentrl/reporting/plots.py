"""`agentrl plot`: compare any number of evaluations (eval JSONL files) as PNG charts.

Writes, into one folder:
- `success_by_split.png`: valid_seen / valid_unseen / overall success per evaluated model;
- `success_vs_invalid.png`: overall success against mean invalid actions per episode;
- `task_types.png`: overall success per task type, one bar per evaluated model;
- `comparison.csv`: the numbers behind the charts.

Runs are shown in the order given (e.g. base, update 40, update 80). Each file contributes its
`type=summary` records; a file without them (an interrupted evaluation) is summarized from
its episodes. Drawing uses matplotlib's Agg canvas without pyplot, so no display is needed.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from matplotlib.axes import Axes
from matplotlib.container import BarContainer
from matplotlib.figure import Figure

from agentrl.algo.metrics import OVERALL, SplitSummary
from agentrl.store.eval_records import EvalFile, read_eval_file

__all__ = [
    "Level",
    "PlotError",
    "RunPoint",
    "plot_eval_files",
    "plot_runs",
    "run_points",
    "success_curve_plot",
]

SPLITS = ("valid_seen", "valid_unseen", OVERALL)


class PlotError(ValueError):
    """The inputs cannot be plotted (names the file and the problem)."""


@dataclass(frozen=True)
class RunPoint:
    """The numbers one evaluation contributes to the charts."""

    label: str
    success: dict[str, float]
    """Success rate per split present (`valid_seen`, `valid_unseen`, `overall`)."""
    games: dict[str, int]
    """Episodes per split present."""
    mean_invalid_actions: float
    reward_mean: float
    mean_env_steps: float
    task_success: dict[str, float]
    """Overall success rate per task type."""


def _point(label: str, summaries: dict[str, SplitSummary]) -> RunPoint:
    overall = summaries[OVERALL]
    return RunPoint(
        label=label,
        success={s: summaries[s].stats.success_rate for s in SPLITS if s in summaries},
        games={s: summaries[s].stats.episodes for s in SPLITS if s in summaries},
        mean_invalid_actions=overall.stats.mean_invalid_actions,
        reward_mean=overall.stats.reward_mean,
        mean_env_steps=overall.stats.mean_env_steps,
        task_success=overall.success_by_task_type(),
    )


def run_points(files: Sequence[EvalFile], labels: Sequence[str] | None = None) -> list[RunPoint]:
    """One `RunPoint` per file; labels default to each file's label, made unique."""
    if labels is not None and len(labels) != len(files):
        raise PlotError(f"got {len(labels)} labels for {len(files)} files")
    points: list[RunPoint] = []
    seen: set[str] = set()
    for i, data in enumerate(files):
        summaries = data.effective_summaries()
        if OVERALL not in summaries or summaries[OVERALL].stats.episodes == 0:
            raise PlotError(f"{data.path}: no episodes and no type=summary records to plot")
        label = labels[i] if labels is not None else data.label
        if label in seen:
            label = f"{label} ({data.path.stem})"
        seen.add(label)
        points.append(_point(label, summaries))
    return points


def _bar_labels(ax: Axes, bars: BarContainer, horizontal: bool = False) -> None:
    values = [b.get_width() if horizontal else b.get_height() for b in bars]
    ax.bar_label(bars, labels=[f"{v:.0%}" for v in values], fontsize=7, padding=1)


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig, fig.subplots()


def _success_by_split(points: Sequence[RunPoint], path: Path) -> None:
    splits = [s for s in SPLITS if any(s in p.success for p in points)]
    fig, ax = _figure(max(5.0, 1.4 * len(points) + 2), 4.0)
    width = 0.8 / len(splits)
    for j, split in enumerate(splits):
        xs = [i + (j - (len(splits) - 1) / 2) * width for i in range(len(points))]
        bars = ax.bar(xs, [p.success.get(split, 0.0) for p in points], width, label=split)
        _bar_labels(ax, bars)
    ax.set_xticks(range(len(points)), [p.label for p in points])
    ax.set_ylim(0, 1.08)
    ax.yaxis.set_major_formatter("{x:.0%}")
    ax.set_ylabel("success rate")
    ax.set_title("Success per split")
    fig.legend(loc="outside right upper", fontsize=8)
    fig.savefig(path)


def _success_vs_invalid(points: Sequence[RunPoint], path: Path) -> None:
    fig, ax = _figure(5.5, 4.0)
    xs = [p.mean_invalid_actions for p in points]
    ys = [p.success[OVERALL] for p in points]
    ax.plot(xs, ys, linestyle="--", color="0.6", zorder=1)
    ax.scatter(xs, ys, zorder=2, color="tab:blue")
    for x, y, p in zip(xs, ys, points, strict=True):
        ax.annotate(p.label, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.yaxis.set_major_formatter("{x:.0%}")
    ax.set_xlabel("mean invalid actions per episode")
    ax.set_ylabel("overall success rate")
    ax.set_title("Success vs invalid actions")
    ax.margins(0.2)
    fig.savefig(path)


def _task_types(points: Sequence[RunPoint], path: Path) -> None:
    tasks = sorted({t for p in points for t in p.task_success})
    fig, ax = _figure(7.5, max(3.0, 0.25 * len(tasks) * len(points) + 1.5))
    height = 0.8 / len(points)
    for j, p in enumerate(points):
        ys = [i + (j - (len(points) - 1) / 2) * height for i in range(len(tasks))]
        bars = ax.barh(ys, [p.task_success.get(t, 0.0) for t in tasks], height, label=p.label)
        _bar_labels(ax, bars, horizontal=True)
    ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.1)
    ax.xaxis.set_major_formatter("{x:.0%}")
    ax.set_xlabel("success rate (all evaluated splits)")
    ax.set_title("Success per task type")
    fig.legend(loc="outside right upper", fontsize=8)
    fig.savefig(path)


def _csv(points: Sequence[RunPoint], path: Path) -> None:
    tasks = sorted({t for p in points for t in p.task_success})
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["label", *(f"success_{s}" for s in SPLITS), *(f"games_{s}" for s in SPLITS)]
            + ["reward_mean", "mean_invalid_actions", "mean_env_steps"]
            + [f"success_{t}" for t in tasks]
        )
        for p in points:
            writer.writerow(
                [p.label]
                + [f"{p.success[s]:.4f}" if s in p.success else "" for s in SPLITS]
                + [p.games.get(s, "") for s in SPLITS]
                + [f"{p.reward_mean:.4f}", f"{p.mean_invalid_actions:.4f}"]
                + [f"{p.mean_env_steps:.2f}"]
                + [f"{p.task_success[t]:.4f}" if t in p.task_success else "" for t in tasks]
            )


def plot_runs(points: Sequence[RunPoint], out_dir: Path) -> tuple[Path, ...]:
    """Draw the charts and the CSV for `points` into `out_dir`; return the files written."""
    if not points:
        raise PlotError("nothing to plot: give at least one eval file")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = (
        out_dir / "success_by_split.png",
        out_dir / "success_vs_invalid.png",
        out_dir / "task_types.png",
        out_dir / "comparison.csv",
    )
    _success_by_split(points, written[0])
    _success_vs_invalid(points, written[1])
    _task_types(points, written[2])
    _csv(points, written[3])
    return written


def plot_eval_files(
    paths: Sequence[Path], out_dir: Path, labels: Sequence[str] | None = None
) -> tuple[Path, ...]:
    """Read eval JSONL files and draw the comparison charts into `out_dir`."""
    files = [read_eval_file(Path(p)) for p in paths]
    return plot_runs(run_points(files, labels), out_dir)


@dataclass(frozen=True)
class Level:
    """A horizontal reference line of `success_curve_plot` (a baseline's success)."""

    value: float
    label: str
    linestyle: str = "--"
    color: str = "grey"


def success_curve_plot(
    path: Path,
    *,
    held_out: Sequence[tuple[int, float]],
    held_out_label: str,
    batches: Sequence[float] | None,
    batch_label: str,
    levels: Sequence[Level],
    title: str,
    xlabel: str,
    legend: Literal["best", "lower right", "center right", "upper right", "lower left"],
) -> Path:
    """A training run's success as a PNG: held-out `(update, success)` points, the training
    batches' success per update (1, 2, ...; None: no line) and reference `levels`, on a
    0-1 axis; `legend` is matplotlib's legend location. Returns `path`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = Figure(figsize=(6, 4))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    updates = [update for update, _ in held_out]
    axes.plot(updates, [success for _, success in held_out], marker="o", label=held_out_label)
    if batches is not None:
        axes.plot(range(1, len(batches) + 1), batches, alpha=0.4, label=batch_label)
    for level in levels:
        axes.axhline(level.value, linestyle=level.linestyle, color=level.color, label=level.label)
    axes.set(title=title, xlabel=xlabel, ylabel="success", ylim=(0, 1.02))
    axes.legend(loc=legend)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path
