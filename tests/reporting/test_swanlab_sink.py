"""SwanLab sink, for real, in offline and disabled modes (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.config import SwanLabMode
from agentrl.metrics import update_metrics
from agentrl.reporting.sinks import make_sinks
from agentrl.testing import synthetic_group

pytest.importorskip("swanlab")


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SWANLAB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _scalars(log_dir: Path) -> dict[tuple[str, int], float]:
    """Scalars stored in an offline SwanLab run (SwanLab's own reader and record schema)."""
    try:
        from swanlab.proto.swanlab.record.v1.record_pb2 import Record
        from swanlab.sdk.internal.core_python.store import DataStoreReader
    except ImportError:  # pragma: no cover - internal layout of another SwanLab version
        pytest.skip("this SwanLab version stores runs differently")
    files = list(log_dir.glob("run-*/run-*.swanlab"))
    assert len(files) == 1, files
    reader = DataStoreReader()
    reader.open(files[0])
    out: dict[tuple[str, int], float] = {}
    for raw in reader:
        record = Record()
        record.ParseFromString(raw)
        if record.HasField("scalar"):
            out[(record.scalar.key, record.scalar.step)] = record.scalar.value.number
    reader.close()
    return out


def _update(n: int) -> object:
    groups = [synthetic_group([1.0, 0.0, 0.0, 0.0], group_id="a")]
    return update_metrics(n, groups, loss=0.1 * n, timings={"rollout": 3.0})


def test_offline_mode_writes_metrics_locally(tmp_path: Path) -> None:
    from agentrl.reporting.swanlab import SwanLabSink

    log_dir = tmp_path / "swanlab"
    sink = SwanLabSink(
        mode=SwanLabMode.OFFLINE,
        project="agentrl-test",
        experiment_name="offline",
        log_dir=log_dir,
        config={"lora_rank": 32},
    )
    for n in (1, 2):
        sink.log("train", n, _update(n))  # type: ignore[arg-type]
    sink.close()
    sink.close()
    scalars = _scalars(log_dir)
    assert scalars[("train/loss", 2)] == pytest.approx(0.2)
    assert scalars[("train/stats/success_rate", 1)] == pytest.approx(0.25)
    assert scalars[("train/timings/rollout", 2)] == pytest.approx(3.0)
    with pytest.raises(ValueError, match="closed"):
        sink.log("train", 3, _update(3))  # type: ignore[arg-type]


def test_disabled_mode_writes_nothing(tmp_path: Path) -> None:
    from agentrl.reporting.swanlab import SwanLabSink

    log_dir = tmp_path / "swanlab"
    sink = SwanLabSink(mode=SwanLabMode.DISABLED, project="p", experiment_name="d", log_dir=log_dir)
    sink.log("train", 1, _update(1))  # type: ignore[arg-type]
    sink.close()
    assert not log_dir.exists() or not any(log_dir.rglob("*.swanlab"))


def test_make_sinks_offline_fans_out(tmp_path: Path) -> None:
    sinks = make_sinks(
        tmp_path / "run" / "metrics.jsonl", swanlab_mode=SwanLabMode.OFFLINE, console=False
    )
    assert [type(s).__name__ for s in sinks.sinks] == ["JsonlSink", "SwanLabSink"]
    sinks.log("train", 1, _update(1))  # type: ignore[arg-type]
    sinks.close()
    assert _scalars(tmp_path / "run" / "swanlab")[("train/loss", 1)] == pytest.approx(0.1)


def test_online_without_credentials_says_what_to_do(tmp_path: Path) -> None:
    from agentrl.reporting.swanlab import SwanLabError, SwanLabSink

    with pytest.raises(SwanLabError, match=r"swanlab login.*SWANLAB_API_KEY.*offline"):
        SwanLabSink(
            mode=SwanLabMode.ONLINE, project="p", experiment_name="o", log_dir=tmp_path / "s"
        )


def test_credentials_are_found_where_swanlab_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrl.reporting.swanlab import has_credentials

    assert not has_credentials()
    monkeypatch.setenv("SWANLAB_API_KEY", "k")
    assert has_credentials()
    monkeypatch.delenv("SWANLAB_API_KEY")
    netrc = tmp_path / "home" / ".swanlab" / ".netrc"
    netrc.parent.mkdir(parents=True)
    netrc.write_text("machine api.swanlab.cn login user password k\n")
    assert has_credentials()
