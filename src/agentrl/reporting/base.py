"""What every metric sink shares: the `Reportable` and `MetricSink` protocols and the base of
the experiment-tracker sinks (`TrackerRunSink`, subclassed by SwanLab's and W&B's). The sinks
themselves and the factory that picks them are `agentrl.reporting.sinks`."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agentrl.core.types import JsonObject

__all__ = ["MetricSink", "Reportable", "TrackerRunSink"]


@runtime_checkable
class Reportable(Protocol):
    """A metrics record (see `agentrl.algo.metrics`)."""

    def to_json(self) -> JsonObject:
        """The record as a nested JSON object."""
        ...

    def as_flat(self, prefix: str = "") -> dict[str, float]:
        """Numeric fields as a flat `{"a/b": value}` map."""
        ...


@runtime_checkable
class MetricSink(Protocol):
    """Somewhere metrics go."""

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Record one metrics record."""
        ...

    def close(self) -> None:
        """Flush and release resources (idempotent)."""
        ...


class TrackerRunSink:
    """Shared part of the experiment-tracker sinks (SwanLab, W&B): a run object with
    `log(dict, step=)` and `finish()`, set up by the subclass as `self._run`."""

    _run: Any
    _closed: bool = False

    def log(self, kind: str, step: int, record: Reportable) -> None:
        """Log every numeric field of `record` under `kind/`."""
        if self._closed:
            raise ValueError(f"{type(self).__name__} is closed")
        self._run.log(record.as_flat(prefix=kind), step=step)

    def close(self) -> None:
        """Finish the run (idempotent)."""
        if not self._closed:
            self._closed = True
            self._run.finish()
