"""The training run folder and its checkpoint records.

`<run_dir>/checkpoints/<name>.json` describes one checkpoint (where the backend put the
training state and the sampler weights, the update, the base model); `agentrl eval
--model-path` accepts it. See docs/training.md for the whole folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentrl.backends.base import CheckpointRef
from agentrl.config import TrainConfig
from agentrl.core.errors import CheckpointError

__all__ = [
    "CHECKPOINTS_DIR",
    "METRICS_FILE",
    "ROLLOUTS_FILE",
    "RUN_FILE",
    "CheckpointInfo",
    "check_run_dir",
    "checkpoint_info",
    "commit_checkpoint",
    "latest_checkpoint",
    "resolve_model_path",
]

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"
CHECKPOINTS_DIR = "checkpoints"


@dataclass(frozen=True)
class CheckpointInfo:
    """A saved checkpoint: `<run_dir>/checkpoints/<name>.json` (accepted by `--model-path`)."""

    name: str
    update: int
    state_path: str
    sampler_path: str
    base_model: str
    backend: str

    @property
    def ref(self) -> CheckpointRef:
        """The backend's reference to this checkpoint."""
        return CheckpointRef(self.name, self.state_path, self.sampler_path)

    def write(self, path: Path) -> None:
        """Write atomically (a crash never leaves half a file)."""
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path) -> CheckpointInfo:
        """Read one; a malformed file raises ValueError naming it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(**{name: data[name] for name in cls.__dataclass_fields__})
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise CheckpointError(path, f"not an agentrl checkpoint record ({exc})") from exc


def checkpoint_info(
    config: TrainConfig, update: int, name: str, ref: CheckpointRef
) -> CheckpointInfo:
    """The record of checkpoint `name`, saved after update `update` of the run `config` runs."""
    return CheckpointInfo(
        name=name,
        update=update,
        state_path=ref.state_path,
        sampler_path=ref.sampler_path,
        base_model=config.base_model,
        backend=config.backend.value,
    )


def commit_checkpoint(run_dir: Path, info: CheckpointInfo) -> None:
    """Write the checkpoint record: from now on `--resume` continues from it."""
    folder = Path(run_dir) / CHECKPOINTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    info.write(folder / f"{info.name}.json")


def latest_checkpoint(run_dir: Path) -> CheckpointInfo | None:
    """The checkpoint of the highest update in `run_dir`, if any."""
    folder = Path(run_dir) / CHECKPOINTS_DIR
    infos = [CheckpointInfo.read(p) for p in sorted(folder.glob("*.json"))]
    return max(infos, key=lambda i: i.update, default=None)


def check_run_dir(config: TrainConfig) -> None:
    """Refuse to start a fresh run in a folder that holds one (call before building a backend)."""
    run_dir = Path(config.run_dir)
    if not config.resume and ((run_dir / RUN_FILE).exists() or latest_checkpoint(run_dir)):
        raise FileExistsError(
            f"{run_dir} already holds a training run; pass --resume to continue it, or choose "
            "another --run-dir"
        )


def resolve_model_path(model_path: str) -> tuple[str, CheckpointInfo | None]:
    """The sampler weights `--model-path` names, and the trainer's checkpoint record if any.

    Accepts a checkpoint record (`runs/train/checkpoints/update-0040.json`), a local
    checkpoint folder (`runs/train/checkpoints/update-0040`, holding `sampler/`), or a
    sampler path as is (`trio://...`, an adapter folder).
    """
    path = Path(model_path).expanduser()
    record = path if path.suffix == ".json" else path.with_name(path.name + ".json")
    if record.is_file():
        info = CheckpointInfo.read(record)
        return info.sampler_path, info
    if path.is_dir() and (path / "sampler").is_dir():
        return str(path / "sampler"), None
    if "://" not in model_path and not path.exists():
        raise FileNotFoundError(
            f"--model-path {model_path}: no such checkpoint (pass a checkpoint record "
            "<run_dir>/checkpoints/<name>.json, a local checkpoint folder, or a trio:// path)"
        )
    return model_path, None
