"""The evaluation JSONL layout: `run`, `episode` and `summary` records (see docs/evaluation.md).

An `episode` record embeds one `agentrl.store.records.TrajectoryRecord` (the project's single
on-disk form of a trajectory, documented in docs/records.md): the conversation as text, and
per turn the assistant text, parsed action or parse error, status and the environment's
feedback, plus termination reason, reward and token counts. Token ids are not stored (a
trajectory's prompt grows every turn). Reading gives the records back; `record.to_trajectory()`
turns one into a `Trajectory` (empty token tuples), enough for every metric in
`agentrl.algo.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from agentrl.algo.metrics import OVERALL, SplitSummary, eval_summaries
from agentrl.core.types import JsonObject, TaskInfo, Trajectory
from agentrl.store.jsonl import JsonlError, read_jsonl
from agentrl.store.records import TrajectoryRecord

__all__ = [
    "RECORD_VERSION",
    "EpisodeEntry",
    "EvalFile",
    "episode_id",
    "episode_record",
    "read_eval_file",
    "run_record",
    "summaries_in_order",
    "summary_record",
]

RECORD_VERSION = 2
"""Version of the eval file layout (2: episodes embed `TrajectoryRecord`)."""


def episode_id(task: TaskInfo, sample: int = 0) -> str:
    """Stable identifier of one evaluated trajectory: `<split>/<task_id>#<sample>`."""
    return f"{task.split}/{task.task_id}#{sample}"


def run_record(label: str, config: JsonObject) -> JsonObject:
    """The first record of an eval file: what was evaluated and how."""
    return {"type": "run", "version": RECORD_VERSION, "label": label, "config": config}


def episode_record(trajectory: Trajectory | TrajectoryRecord, sample: int = 0) -> JsonObject:
    """One `type=episode` record: an episode id and the trajectory's `TrajectoryRecord`."""
    record = (
        trajectory
        if isinstance(trajectory, TrajectoryRecord)
        else TrajectoryRecord.from_trajectory(trajectory)
    )
    task = TaskInfo(task_id=record.task_id, split=record.split)
    return {
        "type": "episode",
        "episode_id": episode_id(task, sample),
        "sample": sample,
        "trajectory": record.model_dump(mode="json"),
    }


def summary_record(summary: SplitSummary, label: str) -> JsonObject:
    """One `type=summary` record (per split, and `overall`)."""
    return {"type": "summary", "label": label, **summary.to_json()}


@dataclass(frozen=True)
class EpisodeEntry:
    """One episode read from an eval file."""

    episode_id: str
    record: TrajectoryRecord

    @cached_property
    def trajectory(self) -> Trajectory:
        """The episode as a `Trajectory` (no token ids), for `agentrl.algo.metrics`."""
        return self.record.to_trajectory()


@dataclass(frozen=True)
class EvalFile:
    """What an eval JSONL file holds."""

    path: Path
    label: str
    episodes: tuple[EpisodeEntry, ...]
    summaries: dict[str, SplitSummary] = field(default_factory=dict)
    """The last summary written per split (`overall` included); empty if none was written."""
    config: JsonObject = field(default_factory=dict)

    @property
    def finished_ids(self) -> frozenset[str]:
        """Episode ids already written (what `--resume` skips)."""
        return frozenset(e.episode_id for e in self.episodes)

    def effective_summaries(self) -> dict[str, SplitSummary]:
        """The written summaries, or ones computed from the episodes if none were written."""
        if self.summaries:
            return self.summaries
        return {s.split: s for s in eval_summaries(e.trajectory for e in self.episodes)}


def _fail(path: Path, index: int, what: str, exc: Exception) -> JsonlError:
    return JsonlError(f"{path}: record {index}: malformed {what} record: {exc}")


def read_eval_file(path: Path) -> EvalFile:
    """Read an eval JSONL file (an incomplete last line, left by a crash, is skipped)."""
    path = Path(path)
    label: str | None = None
    config: JsonObject = {}
    episodes: dict[str, EpisodeEntry] = {}
    summaries: dict[str, SplitSummary] = {}
    records = read_jsonl(path)
    if records and not any(r.get("type") in ("run", "episode", "summary") for r in records):
        raise JsonlError(
            f"{path} is not an agentrl eval file (no run, episode or summary records; "
            "`agentrl eval --output FILE` writes one)"
        )
    for index, record in enumerate(records, start=1):
        kind = record.get("type")
        try:
            if kind == "run":
                label = str(record.get("label") or label or "")
                raw_config = record.get("config")
                config = raw_config if isinstance(raw_config, dict) else {}
            elif kind == "episode":
                eid = str(record["episode_id"])
                trajectory = TrajectoryRecord.model_validate(record["trajectory"])
                episodes[eid] = EpisodeEntry(eid, trajectory)
            elif kind == "summary":
                body = {k: v for k, v in record.items() if k not in ("type", "label")}
                summary = SplitSummary.from_json(body)
                summaries[summary.split] = summary
                label = label or str(record.get("label") or "")
        except (KeyError, ValidationError) as exc:
            raise _fail(path, index, str(kind), exc) from exc
    return EvalFile(
        path=path,
        label=label or path.stem,
        episodes=tuple(episodes.values()),
        summaries=summaries,
        config=config,
    )


def summaries_in_order(summaries: Iterable[SplitSummary]) -> list[SplitSummary]:
    """Summaries with `overall` last."""
    items = list(summaries)
    return [s for s in items if s.split != OVERALL] + [s for s in items if s.split == OVERALL]
