"""Reporting: metric sinks (JSONL, SwanLab, W&B, console), eval JSONL records, plots, viewer.

SwanLab, W&B, plots (matplotlib) and the viewer are imported from their own modules
(`agentrl.reporting.swanlab`, `.wandb`, `.plots`, `.viewer`) so importing this package stays
light.
"""

from agentrl.reporting.sinks import (
    SUMMARY_COLUMNS,
    TRAIN_COLUMNS,
    Column,
    ConsoleSink,
    JsonlSink,
    MetricSink,
    MultiSink,
    Reportable,
    format_table,
    make_sinks,
    tracker_sinks,
)
from agentrl.store.eval_records import (
    EpisodeEntry,
    EvalFile,
    episode_id,
    episode_record,
    read_eval_file,
    run_record,
    summary_record,
)
from agentrl.store.jsonl import JsonlError, JsonlWriter, WriteMode, read_jsonl

__all__ = [
    "SUMMARY_COLUMNS",
    "TRAIN_COLUMNS",
    "Column",
    "ConsoleSink",
    "EpisodeEntry",
    "EvalFile",
    "JsonlError",
    "JsonlSink",
    "JsonlWriter",
    "MetricSink",
    "MultiSink",
    "Reportable",
    "WriteMode",
    "episode_id",
    "episode_record",
    "format_table",
    "make_sinks",
    "read_eval_file",
    "read_jsonl",
    "run_record",
    "summary_record",
    "tracker_sinks",
]
