"""The `agentrl` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.cli import build_parser, main
from tests.helpers.paths import SRC


def test_parser_requires_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["generate"])  # --out is required
    assert "--out" in capsys.readouterr().err
    args = build_parser().parse_args(["generate", "--out", "x", "--valid-unseen", "3"])
    assert (args.train, args.valid_seen, args.valid_unseen, args.seed) == (0, 0, 3, 0)


def test_generate_writes_verified_games(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("textworld")
    from agentrl.envs.alfworld.data import find_games

    command = ["generate", "--out", str(tmp_path), "--valid-seen", "1", "--seed", "3", "--quiet"]
    command += ["--task-types", "look_at_obj_in_light", "--max-receptacles", "12"]
    status = main(command)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "wrote 1 games" in out and "valid_seen (1)" in out
    (game,) = find_games(tmp_path)
    assert game.split == "valid_seen" and game.task_type == "look_at_obj_in_light"


def test_generate_fails_when_nothing_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("textworld")
    status = main(
        ["generate", "--out", str(tmp_path), "--train", "1", "--timeout", "0.01", "--quiet"]
    )
    assert status == 1
    assert "only 0 of 1 games" in capsys.readouterr().err


# -- train / eval / plot / view ----------------------------------------------------------------

RECIPE_TRAIN_FLAGS = [
    "--base-model",
    "--max-steps",
    "--games-per-batch",
    "--group-size",
    "--max-episode-steps",
    "--max-trajectory-tokens",
    "--max-assistant-tokens",
    "--temperature",
    "--top-p",
    "--learning-rate",
    "--lora-rank",
    "--save-every",
    "--seed",
    "--swanlab-mode",
    "--resume",
    "--run-dir",
]
RECIPE_EVAL_FLAGS = [
    "--base-model",
    "--model-path",
    "--split",
    "--limit-per-split",
    "--games-per-batch",
    "--temperature",
    "--output",
    "--overwrite-output",
    "--swanlab-mode",
    "--resume",
    "--policy",
    "--data-root",
]


@pytest.mark.parametrize(
    ("command", "flags"), [("train", RECIPE_TRAIN_FLAGS), ("eval", RECIPE_EVAL_FLAGS)]
)
def test_help_lists_the_recipe_flags(
    command: str, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in flags:
        assert flag in text, flag
    for command_name in ("plot", "view", "demo"):
        with pytest.raises(SystemExit):
            main([command_name, "--help"])
        assert command_name in capsys.readouterr().out


def test_bad_flags_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", "--top-p", "2", "--lora-rank", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--top-p:" in err and "--lora-rank:" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        main(["eval", "--output", "e.jsonl", "--split", "test"])
    assert "invalid choice: 'test'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--output", "e.txt"])
    assert "--output: " in capsys.readouterr().err


def test_missing_data_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere"
    status = main(
        ["eval", "--policy", "planner", "--data-root", str(missing), "--output", "o.jsonl"]
    )
    assert status == 1
    err = capsys.readouterr().err
    assert "ALFWorld data not found" in err and "agentrl generate" in err


def _bare_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "PYTRIO" not in k and "SWANLAB" not in k}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(SRC))
    return env


def test_missing_credentials_are_explained(tmp_path: Path) -> None:
    pytest.importorskip("pytrio")
    run_dir = str(tmp_path / "run")
    cli = [sys.executable, "-m", "agentrl.cli", "train", "--env", "toy", "--run-dir", run_dir]
    env = _bare_env(tmp_path)
    remote = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
    assert remote.returncode == 1
    assert "No PyTRIO API key" in remote.stderr and "PYTRIO_API_KEY" in remote.stderr
    swanlab = subprocess.run(
        [*cli, "--backend", "local", "--swanlab-mode", "online"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert swanlab.returncode == 1
    assert "swanlab login" in swanlab.stderr and "Traceback" not in swanlab.stderr


def test_train_then_eval_the_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI end to end on the toy env with the tiny model (no learning expected)."""
    pytest.importorskip("torch")
    small = ["--env", "toy", "--backend", "local", "--base-model", "tiny", "--device", "cpu"]
    small += ["--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
    run_dir = tmp_path / "run"
    train = ["train", *small, "--max-steps", "1", "--games-per-batch", "1", "--group-size", "2"]
    assert main([*train, "--lora-rank", "4", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    record = run_dir / "checkpoints" / "update-0001.json"
    assert f"--model-path {record}" in out
    assert main([*train, "--run-dir", str(run_dir)]) == 1
    assert "already holds a training run" in capsys.readouterr().err

    evals = []
    for name, extra in (("base", []), ("update-0001", ["--model-path", str(record)])):
        output = tmp_path / f"{name}.jsonl"
        flags = ["eval", *small, "--split", "valid_seen", "--limit-per-split", "2"]
        assert main([*flags, *extra, "--output", str(output)]) == 0
        assert f"{name}: 2 episodes played" in capsys.readouterr().out
        evals.append(output)
    assert main(["eval", *small, "--output", str(evals[0])]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err

    assert main(["plot", *map(str, evals), "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "success_by_split.png").stat().st_size > 1000
    assert main(["view", str(evals[1])]) == 0
    assert "update-0001" in (tmp_path / "update-0001.html").read_text()
    capsys.readouterr()
    assert main(["view", str(tmp_path / "missing.jsonl")]) == 1
    assert "no such eval file" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_during_training_saves_a_checkpoint_then_resume(tmp_path: Path) -> None:
    """A real `agentrl train` process stopped by SIGINT, then continued with --resume."""
    pytest.importorskip("torch")
    import signal
    import time

    run_dir = tmp_path / "run"
    cli = [sys.executable, "-m", "agentrl.cli", "train", "--env", "toy", "--backend", "local"]
    cli += ["--base-model", "tiny", "--device", "cpu", "--games-per-batch", "1"]
    cli += ["--group-size", "2", "--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
    cli += ["--run-dir", str(run_dir), "--save-every", "1000"]
    env = _bare_env(tmp_path)
    process = subprocess.Popen(
        [*cli, "--max-steps", "500"], env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE
    )
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if metrics.is_file() and metrics.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    assert process.poll() is None, "training ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err.decode()[-2000:]
    done = len(metrics.read_text().splitlines())
    record = run_dir / "checkpoints" / f"update-{done:04d}.json"
    assert record.is_file(), sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert f"update-{done:04d} is saved" in err.decode() and "--resume" in err.decode()

    more = done + 2
    resumed = subprocess.run(
        [*cli, "--max-steps", str(more), "--resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    assert steps == list(range(1, more + 1))
    assert (run_dir / "checkpoints" / f"update-{more:04d}.json").is_file()
