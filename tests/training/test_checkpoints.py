"""Checkpoint records and what `--model-path` accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.checkpoints import CheckpointInfo, latest_checkpoint, resolve_model_path


def _info(run: Path, update: int) -> CheckpointInfo:
    name = f"update-{update:04d}"
    folder = run / "checkpoints" / name
    (folder / "sampler").mkdir(parents=True)
    info = CheckpointInfo(
        name, update, str(folder / "state"), str(folder / "sampler"), "m", "local"
    )
    info.write(run / "checkpoints" / f"{name}.json")
    return info


def test_latest_and_model_path_forms(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
    early, late = _info(tmp_path, 20), _info(tmp_path, 100)
    assert latest_checkpoint(tmp_path) == late
    record = tmp_path / "checkpoints" / "update-0020.json"
    assert resolve_model_path(str(record)) == (early.sampler_path, early)
    assert resolve_model_path(str(record.with_suffix(""))) == (early.sampler_path, early)
    (record).unlink()
    folder = tmp_path / "checkpoints" / "update-0020"
    assert resolve_model_path(str(folder)) == (str(folder / "sampler"), None)
    assert resolve_model_path("trio://run-1/sampler_weights/u40") == (
        "trio://run-1/sampler_weights/u40",
        None,
    )
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        resolve_model_path(str(tmp_path / "nothing"))


def test_malformed_record_is_named(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    bad = tmp_path / "checkpoints" / "update-0001.json"
    bad.write_text('{"name": "update-0001"}')
    with pytest.raises(ValueError, match=r"update-0001\.json: not an agentrl checkpoint"):
        latest_checkpoint(tmp_path)
