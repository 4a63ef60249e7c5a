"""The end of an evaluation: one `type=summary` record per split and `overall` over the
episodes of the file (this call's and those already in it), the same summaries for the
trackers, and the label a run is known by (`planner`, `base`, `update-0040`)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from agentrl.algo.metrics import SplitSummary, eval_summaries
from agentrl.config import EvalConfig, EvalPolicy
from agentrl.reporting.sinks import MetricSink
from agentrl.store.eval_records import read_eval_file, summary_record
from agentrl.store.jsonl import JsonlWriter

__all__ = ["default_label", "log_summaries", "write_summaries"]


def write_summaries(
    writer: JsonlWriter, output: Path, wanted: Collection[str], label: str
) -> tuple[SplitSummary, ...]:
    """Summaries of the episodes `wanted` (episode ids) as the file `output` now holds them,
    each written by `writer` as a `type=summary` record."""
    data = read_eval_file(output)
    chosen = [e.trajectory for e in data.episodes if e.episode_id in wanted]
    summaries = eval_summaries(chosen)
    for summary in summaries:
        writer.write(summary_record(summary, label))
    return summaries


def log_summaries(sinks: MetricSink, summaries: tuple[SplitSummary, ...]) -> None:
    """Each summary to the sinks, as `eval/<split>` at step 0."""
    for summary in summaries:
        sinks.log(f"eval/{summary.split}", 0, summary)


def default_label(config: EvalConfig) -> str:
    """A baseline's policy (`planner`, `solver`), `base`, or the checkpoint's name
    (`update-0040`)."""
    if config.experiment_name:
        return config.experiment_name
    if config.policy is not EvalPolicy.MODEL:
        return config.policy.value  # a baseline: planner, solver, nosearch
    if config.model_path is None:
        return "base"
    parts = [p for p in config.model_path.removesuffix(".json").split("/") if p]
    if len(parts) > 1 and parts[-1] == "sampler":  # <checkpoint>/sampler
        return parts[-2]
    return parts[-1] if parts else config.model_path
