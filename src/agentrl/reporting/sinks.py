"""Metric sinks behind one small protocol: JSONL (always), SwanLab, W&B, console table.

A sink receives records that know how to present themselves (`to_json()` for files,
`as_flat()` for dashboards), tagged with a `kind` ("train", "eval/valid_seen", ...) and a
step (the update counter).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tqdm import tqdm  # type: ignore[import-untyped]

from agentrl.config import SwanLabMode, WandbMode
from agentrl.core.types import JsonObject, JsonValue
from agentrl.reporting.base import MetricSink, Reportable, TrackerRunSink
from agentrl.store.jsonl import JsonlWriter, WriteMode

__all__ = [
    "SUMMARY_COLUMNS",
    "TRAIN_COLUMNS",
    "Column",
    "ConsoleSink",
    "JsonlSink",
    "MetricSink",
    "MultiSink",
    "Reportable",
    "TrackerRunSink",
    "format_table",
    "make_sinks",
    "tracker_sinks",
]


class JsonlSink:
    """Appends `{"type": kind, "step": step, "time": ..., **record}` lines; never truncates."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._writer = JsonlWriter(self.path, WriteMode.APPEND)

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Append one record (flushed)."""
        body = record.to_json()
        clash = {"type", "step", "time"} & body.keys()
        if clash:
            raise ValueError(f"record fields {sorted(clash)} clash with the JSONL envelope")
        self._writer.write({"type": kind, "step": step, "time": round(time.time(), 3), **body})

    def close(self) -> None:
        """Close the file."""
        self._writer.close()


@dataclass(frozen=True)
class Column:
    """One console column: a title, a `/`-separated path into `to_json()`, a format."""

    title: str
    path: str
    fmt: str = "{:.3f}"

    def render(self, body: JsonObject, step: int) -> str:
        """The cell text for one record."""
        if self.path == "@step":
            return str(step)
        value: JsonValue = body
        for part in self.path.split("/"):
            if not isinstance(value, dict) or part not in value:
                return "-"
            value = value[part]
        if value is None:
            return "-"
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self.fmt.format(value)
        return str(value)


TRAIN_COLUMNS: tuple[Column, ...] = (
    Column("update", "@step"),
    Column("success", "stats/success_rate", "{:.1%}"),
    Column("reward", "stats/reward_mean", "{:+.3f}"),
    Column("invalid", "stats/mean_invalid_actions", "{:.2f}"),
    Column("steps", "stats/mean_env_steps", "{:.1f}"),
    Column("trunc", "stats/truncation_rate", "{:.1%}"),
    Column("degen", "degenerate_groups", "{:d}"),
    Column("loss", "loss", "{:+.4f}"),
    Column("tokens", "trained_tokens", "{:d}"),
    Column("kl", "sampler_kl", "{:.1e}"),
    Column("sec", "timings/total", "{:.1f}"),
    Column("errors", "stats/errors", "{:d}"),
)
"""Default console columns for per-update training metrics."""

SUMMARY_COLUMNS: tuple[Column, ...] = (
    Column("split", "split"),
    Column("games", "stats/episodes", "{:d}"),
    Column("success", "stats/success_rate", "{:.2%}"),
    Column("reward", "stats/reward_mean", "{:+.4f}"),
    Column("steps", "stats/mean_env_steps", "{:.1f}"),
    Column("trunc", "stats/truncation_rate", "{:.1%}"),
    Column("format", "stats/tool_format_rate", "{:.1%}"),
    Column("admiss.", "stats/admissible_action_rate", "{:.1%}"),
    Column("invalid", "stats/mean_invalid_actions", "{:.2f}"),
    Column("errors", "stats/errors", "{:d}"),
    Column("rew.err", "stats/reward_errors", "{:d}"),
)
"""Default console columns for evaluation summaries."""


def _cells(columns: Sequence[Column], record: Reportable, step: int) -> list[str]:
    body = record.to_json()
    return [c.render(body, step) for c in columns]


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.rjust(w) for cell, w in zip(cells, widths, strict=True))


def format_table(records: Sequence[Reportable], columns: Sequence[Column] = SUMMARY_COLUMNS) -> str:
    """A plain-text table with one row per record (step = row index)."""
    rows = [_cells(columns, r, i) for i, r in enumerate(records)]
    widths = [max([len(c.title), *(len(row[j]) for row in rows)]) for j, c in enumerate(columns)]
    header = _line([c.title for c in columns], widths)
    return "\n".join([header, "-" * len(header), *(_line(row, widths) for row in rows)])


class ConsoleSink:
    """Prints one table row per record (header every `header_every` rows), tqdm-safe."""

    def __init__(
        self,
        columns: Sequence[Column] = TRAIN_COLUMNS,
        *,
        kinds: Sequence[str] = ("train",),
        stream: TextIO | None = None,
        header_every: int = 20,
    ) -> None:
        self._columns = tuple(columns)
        self._kinds = frozenset(kinds)
        self._stream = stream
        self._header_every = header_every
        self._rows = 0
        self._widths = [max(len(c.title), 9) for c in self._columns]

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Print the record's row if its kind is shown."""
        if kind not in self._kinds:
            return
        stream = self._stream or sys.stdout
        if self._rows % self._header_every == 0:
            tqdm.write(_line([c.title for c in self._columns], self._widths), file=stream)
        tqdm.write(_line(_cells(self._columns, record, step), self._widths), file=stream)
        self._rows += 1

    def close(self) -> None:
        """Nothing to release."""


class MultiSink:
    """Fans records out to several sinks."""

    def __init__(self, sinks: Sequence[MetricSink]) -> None:
        self.sinks = tuple(sinks)

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Log to every sink."""
        for sink in self.sinks:
            sink.log(kind, step, record)

    def close(self) -> None:
        """Close every sink, even if one fails."""
        errors: list[BaseException] = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # close the others, then re-raise the first
                errors.append(exc)
        if errors:
            raise errors[0]


def tracker_sinks(
    log_dir: Path,
    *,
    experiment_name: str,
    swanlab_mode: SwanLabMode = SwanLabMode.DISABLED,
    swanlab_project: str = "agentrl",
    wandb_mode: WandbMode = WandbMode.DISABLED,
    wandb_project: str = "agentrl",
    config: JsonObject | None = None,
    swanlab_dir: Path | None = None,
) -> list[MetricSink]:
    """The dashboard sinks that are not disabled (each imported only then), writing their
    local files under `log_dir/swanlab` (or `swanlab_dir`) and `log_dir/wandb`."""
    sinks: list[MetricSink] = []
    if swanlab_mode is not SwanLabMode.DISABLED:
        from agentrl.reporting.swanlab import SwanLabSink

        sinks.append(
            SwanLabSink(
                mode=swanlab_mode,
                project=swanlab_project,
                experiment_name=experiment_name,
                config=config,
                log_dir=swanlab_dir or log_dir / "swanlab",
            )
        )
    if wandb_mode is not WandbMode.DISABLED:
        from agentrl.reporting.wandb import WandbSink

        try:
            sinks.append(
                WandbSink(
                    mode=wandb_mode,
                    project=wandb_project,
                    run_name=experiment_name,
                    config=config,
                    log_dir=log_dir,
                )
            )
        except BaseException:
            MultiSink(sinks).close()  # do not leave a started SwanLab run behind
            raise
    return sinks


def make_sinks(
    metrics_path: Path,
    *,
    swanlab_mode: SwanLabMode = SwanLabMode.DISABLED,
    swanlab_project: str = "agentrl",
    experiment_name: str | None = None,
    config: JsonObject | None = None,
    swanlab_dir: Path | None = None,
    console: bool = True,
    wandb_mode: WandbMode = WandbMode.DISABLED,
    wandb_project: str = "agentrl",
) -> MultiSink:
    """JSONL at `metrics_path`, SwanLab / W&B unless disabled (imported only then), console.

    SwanLab writes under `swanlab_dir` (default: `swanlab/` beside the JSONL file), W&B under
    `wandb/` beside the JSONL file."""
    sinks: list[MetricSink] = [JsonlSink(metrics_path)]
    folder = metrics_path.parent
    sinks.extend(
        tracker_sinks(
            folder,
            experiment_name=experiment_name or folder.name,
            swanlab_mode=swanlab_mode,
            swanlab_project=swanlab_project,
            swanlab_dir=swanlab_dir,
            wandb_mode=wandb_mode,
            wandb_project=wandb_project,
            config=config,
        )
    )
    if console:
        sinks.append(ConsoleSink())
    return MultiSink(sinks)
