"""W&B sink, for real, in offline and disabled modes (no network): the run file is read back."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from agentrl.config import TrainConfig, WandbMode
from agentrl.metrics import update_metrics
from agentrl.reporting.sinks import make_sinks
from agentrl.testing import synthetic_group

pytest.importorskip("wandb")

BLOCK = 32 * 1024
"""W&B's `.wandb` file is a LevelDB-style log: 7-byte file header, then 32 KiB blocks of
records, each `crc32 (4) | length (2) | type (1) | data` (FULL=1, FIRST=2, MIDDLE=3, LAST=4)."""


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DIR", "NETRC", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / ".config" / "wandb"))
    monkeypatch.chdir(tmp_path)


def _records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    pos, out, partial = 7, [], b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:  # block padding
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            partial = chunk
        elif kind == 3:
            partial += chunk
        elif kind == 4:
            out.append(partial + chunk)
    return out


def _scalars(log_dir: Path) -> dict[tuple[str, int], float]:
    """Scalars stored in an offline W&B run (W&B's own protobuf record schema)."""
    import json

    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()  # `finish()` returns before W&B's service has flushed the run file
    files = list(log_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    out: dict[tuple[str, int], float] = {}
    for raw in _records(files[0]):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.HasField("history"):
            step = record.history.step.num
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                if not key.startswith("_"):
                    out[(key, step)] = float(json.loads(item.value_json))
    return out


def _update(n: int) -> object:
    groups = [synthetic_group([1.0, 0.0, 0.0, 0.0], group_id="a")]
    return update_metrics(n, groups, loss=0.1 * n, timings={"rollout": 3.0})


def test_offline_mode_writes_metrics_locally(tmp_path: Path) -> None:
    from agentrl.reporting.wandb import WandbSink

    log_dir = tmp_path / "run"
    sink = WandbSink(
        mode=WandbMode.OFFLINE,
        project="agentrl-test",
        run_name="offline",
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
    from agentrl.reporting.wandb import WandbSink

    log_dir = tmp_path / "run"
    sink = WandbSink(mode=WandbMode.DISABLED, project="p", run_name="d", log_dir=log_dir)
    sink.log("train", 1, _update(1))  # type: ignore[arg-type]
    sink.close()
    assert not log_dir.exists() or not any(log_dir.rglob("*.wandb"))


def test_make_sinks_offline_fans_out(tmp_path: Path) -> None:
    sinks = make_sinks(
        tmp_path / "run" / "metrics.jsonl", wandb_mode=WandbMode.OFFLINE, console=False
    )
    assert [type(s).__name__ for s in sinks.sinks] == ["JsonlSink", "WandbSink"]
    sinks.log("train", 1, _update(1))  # type: ignore[arg-type]
    sinks.close()
    assert _scalars(tmp_path / "run")[("train/loss", 1)] == pytest.approx(0.1)


def test_online_without_credentials_says_what_to_do(tmp_path: Path) -> None:
    from agentrl.reporting.wandb import WandbError, WandbSink

    with pytest.raises(WandbError, match=r"wandb login.*WANDB_API_KEY.*offline"):
        WandbSink(mode=WandbMode.ONLINE, project="p", run_name="o", log_dir=tmp_path / "s")


def test_credentials_are_found_where_wandb_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrl.reporting.wandb import has_credentials

    assert not has_credentials()
    monkeypatch.setenv("WANDB_API_KEY", "k")
    assert has_credentials()
    monkeypatch.delenv("WANDB_API_KEY")
    netrc = tmp_path / "home" / ".netrc"
    netrc.parent.mkdir(parents=True, exist_ok=True)
    netrc.write_text("machine api.wandb.ai\n  login user\n  password k\n")
    netrc.chmod(0o600)
    assert has_credentials()
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert not has_credentials()


def test_flags_reach_the_config() -> None:
    config = TrainConfig(wandb_mode=WandbMode.OFFLINE, wandb_project="p", experiment_name="r")
    assert config.wandb_mode is WandbMode.OFFLINE
    from agentrl.cli import build_parser

    args = build_parser().parse_args(["train", "--wandb-mode", "offline", "--wandb-project", "x"])
    assert args.wandb_mode == "offline" and args.wandb_project == "x"


def test_online_check_fails_fast() -> None:
    from agentrl.recipe import check_credentials

    config = TrainConfig(backend="local", wandb_mode=WandbMode.ONLINE)  # type: ignore[arg-type]
    with pytest.raises(PermissionError, match="wandb login"):
        check_credentials(config)


async def test_a_training_run_logs_to_wandb_offline(tmp_path: Path, qwen_tokenizer: object) -> None:
    pytest.importorskip("torch")
    from tests.helpers.trainer_helpers import toy_config, toy_trainer

    config = toy_config(
        tmp_path / "run", max_steps=1, games_per_batch=1, wandb_mode="offline", save_every=1
    )
    result = await toy_trainer(config, qwen_tokenizer).run()
    assert len(result.metrics) == 1
    scalars = _scalars(tmp_path / "run")
    assert scalars[("train/stats/episodes", 1)] == 3.0
