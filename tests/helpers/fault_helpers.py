"""Helpers for the fault-injection tests: the real `agentrl` CLI in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentrl.records import read_records
from tests.helpers.paths import SRC

SMALL = ["--env", "toy", "--backend", "local", "--base-model", "tiny", "--device", "cpu"]
SMALL += ["--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
TRAIN = ["train", *SMALL, "--games-per-batch", "2", "--group-size", "2", "--lora-rank", "4"]
EVAL = ["eval", *SMALL, "--split", "valid_seen", "--limit-per-split", "3"]


def cli_env(home: Path) -> dict[str, str]:
    """The environment of a CLI subprocess: this worktree's code, no credentials."""
    env = {k: v for k, v in os.environ.items() if "PYTRIO" not in k and "SWANLAB" not in k}
    env.update(HOME=str(home), PYTHONPATH=str(SRC), PYTHONUNBUFFERED="1")
    return env


def agentrl(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `agentrl ARGS` to the end."""
    command = [sys.executable, "-m", "agentrl.cli", *args]
    return subprocess.run(
        command, env=cli_env(home), capture_output=True, text=True, timeout=timeout, cwd=home
    )


def start(home: Path, *args: str, background: bool = False) -> subprocess.Popen[str]:
    """Start `agentrl ARGS`; `background`: with SIGINT ignored, as `cmd &` in a script does."""
    command = [sys.executable, "-m", "agentrl.cli", *args]

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        command,
        env=cli_env(home),
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint if background else None,
    )


def wait_for_lines(process: subprocess.Popen[str], path: Path, lines: int, limit: float) -> None:
    """Wait until `path` has `lines` complete lines (the process must still run)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and process.poll() is None:
        if path.is_file() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.02)
    assert process.poll() is None, "the process ended before it could be interrupted"
    raise AssertionError(f"{path} never reached {lines} lines")


def one_error_line(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The `error:` line of a failed command; asserts no traceback and the needles in it."""
    assert result.returncode in (1, 2), (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def metric_steps(run_dir: Path) -> list[int]:
    """The update of every metrics.jsonl line (each line must parse)."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [int(json.loads(line)["step"]) for line in lines]


def rollout_games(run_dir: Path) -> list[tuple[int, str]]:
    """(update, task id) of every rollouts.jsonl record, one per group (each must parse)."""
    text = (run_dir / "rollouts.jsonl").read_text(encoding="utf-8")
    assert not text or text.endswith("\n"), "rollouts.jsonl ends in a cut line"
    seen: list[tuple[int, str]] = []
    for record in read_records(run_dir / "rollouts.jsonl"):
        if record.branch == 0:
            update = record.extra["update"]
            assert isinstance(update, int)
            seen.append((update, record.task_id))
    return seen
