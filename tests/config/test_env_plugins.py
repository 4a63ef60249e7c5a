"""Envs are plug-ins found by entry point: a throwaway package that declares an `agentrl.envs`
entry point (no change to agentrl) appears in `agentrl envs` and trains with `agentrl train
--env NAME`; an unknown name errors clearly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.config import CommonConfig, EnvName, TrainConfig
from agentrl.config.envspec import EnvSpec
from agentrl.config.plugins import (
    BUILTIN_ENVS,
    UnknownEnvError,
    env_names,
    env_source,
    env_spec,
    env_specs,
)

SRC = Path(__file__).resolve().parents[2] / "src"

PACKAGE = '''
"""A one-step env of its own: answer the number in the task id."""

from agentrl import FunctionEnv, TaskInfo, tool
from agentrl.config.envspec import EnvSpec
from agentrl.tools import function_env_factory


class Echo(FunctionEnv):
    """Say the task's number back."""

    def __init__(self, task: TaskInfo) -> None:
        self.number = int(task.task_id.rsplit("-", 1)[1])

    def observation(self) -> str:
        return f"Say {self.number} with the say tool."

    @tool
    def say(self, number: int) -> str:
        """Say a number.

        Args:
            number: The number to say.
        """
        self.done = True
        self.won = number == self.number
        return "Right." if self.won else "Wrong."


def tasks(config, splits, limit_per_split=None, progress=False):
    count = limit_per_split or 4
    return [TaskInfo(f"{split}-{i}", split=split) for split in splits for i in range(count)]


SPEC = EnvSpec(
    name="echoland",
    summary="say the number back (a throwaway test env)",
    splits=("train", "valid_seen"),
    tasks=tasks,
    group_factory=lambda config: function_env_factory(Echo),
    tool_protocol=lambda config: Echo.protocol("Use the say tool."),
)
'''


def _install(root: Path) -> Path:
    """The package `echoland_pkg` and its dist-info (what pip would write) under `root`."""
    (root / "echoland_pkg.py").write_text(PACKAGE)
    info = root / "echoland_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echoland-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentrl.envs]\necholand = echoland_pkg:SPEC\n")
    return root


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if "PYTRIO" not in k and "SWANLAB" not in k}
    env.update(HOME=str(root), PYTHONPATH=os.pathsep.join([str(root), str(SRC)]))
    return subprocess.run(
        [sys.executable, "-m", "agentrl.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )


def test_a_third_party_env_lists_and_trains(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = _install(tmp_path)
    listed = _run(["envs"], root)
    assert listed.returncode == 0, listed.stderr
    assert "echoland  say the number back" in listed.stdout
    assert "from: echoland-pkg 0.1 (echoland_pkg:SPEC)" in listed.stdout
    assert "toy " in listed.stdout  # the shipped envs stay listed

    run_dir = tmp_path / "run"
    small = ["--env", "echoland", "--backend", "local", "--base-model", "tiny", "--device", "cpu"]
    small += ["--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
    small += ["--max-steps", "1", "--games-per-batch", "1", "--group-size", "2"]
    trained = _run(["train", *small, "--lora-rank", "4", "--run-dir", str(run_dir)], root)
    assert trained.returncode == 0, trained.stderr
    assert "training games (echoland, split train)" in trained.stdout
    assert (run_dir / "checkpoints" / "update-0001.json").is_file()


def test_an_entry_point_on_sys_path_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(_install(tmp_path)))
    assert "echoland" in env_names()
    spec = env_spec("echoland")
    assert isinstance(spec, EnvSpec) and spec.splits == ("train", "valid_seen")
    assert env_source("echoland").distribution == "echoland-pkg 0.1"
    config = TrainConfig(env="echoland", run_dir=tmp_path / "run")
    assert config.env == "echoland"
    assert [t.task_id for t in spec.tasks(config, ["train"], 2)] == ["train-0", "train-1"]
    monkeypatch.delitem(sys.modules, "echoland_pkg", raising=False)


def test_the_shipped_envs_are_found_by_name() -> None:
    assert set(BUILTIN_ENVS) <= set(env_names())
    assert {s.name for s in env_specs()} >= {"alfworld", "pycode", "toy"}
    assert env_spec("pycode").baseline is not None and env_spec("toy").baseline is None
    config = CommonConfig(env="toy")
    assert config.env == "toy" and CommonConfig(env=EnvName.PYCODE).env == "pycode"
    assert env_spec(config.env).tool_protocol(config) is not None


def test_an_unknown_env_errors_clearly(tmp_path: Path) -> None:
    with pytest.raises(UnknownEnvError) as raised:
        env_spec("nosuchenv")
    message = str(raised.value)
    assert "unknown env 'nosuchenv'" in message
    assert "installed envs: agent, alfworld, pycode, search, toy, toy-fetch" in message
    assert '[project.entry-points."agentrl.envs"]' in message
    with pytest.raises(ValueError, match="unknown env 'nosuchenv'; installed envs"):
        TrainConfig(env="nosuchenv", run_dir=tmp_path / "run")


def test_an_entry_point_must_name_an_env_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notaspec_pkg.py").write_text("SPEC = 42\n")
    info = tmp_path / "notaspec_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notaspec-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentrl.envs]\nnotaspec = notaspec_pkg:SPEC\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownEnvError, match="names a int, not an EnvSpec"):
        env_spec("notaspec")
    monkeypatch.delitem(sys.modules, "notaspec_pkg", raising=False)


def test_the_cli_lists_envs(capsys: pytest.CaptureFixture[str]) -> None:
    from agentrl.cli import main

    assert main(["envs", "--verbose"]) == 0
    out = capsys.readouterr().out
    for name in ("alfworld", "pycode", "toy"):
        assert f"\n{name}  " in f"\n{out}"
    assert "baseline: --policy planner" in out and "config fields: call_penalty" in out
    with pytest.raises(SystemExit) as exited:
        main(["train", "--env", "nosuchenv", "--run-dir", "x"])
    assert exited.value.code == 2
    assert "--env: Value error, unknown env 'nosuchenv'" in capsys.readouterr().err
