"""`agentrl train --env agent --agent FILE:FUNCTION` trains the example's plain-openai agent on
the tiny model; `agentrl serve` serves it, records an episode, and stops on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import paths

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

EXAMPLE = paths.EXAMPLES / "05_train_an_existing_agent.py"
TINY = ["--base-model", "tiny", "--backend", "local", "--device", "cpu"]


def _agentrl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrl.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_train_an_agent_from_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = _agentrl(
        "train",
        "--env",
        "agent",
        "--agent",
        f"{EXAMPLE}:agent",
        *TINY,
        "--max-steps",
        "1",
        "--games-per-batch",
        "2",
        "--group-size",
        "2",
        "--max-assistant-tokens",
        "16",
        "--max-trajectory-tokens",
        "1500",
        "--run-dir",
        str(run_dir),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "gateway: http://127.0.0.1:" in result.stdout
    assert "finished update 1 of 1" in result.stdout
    lines = (run_dir / "rollouts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    tasks = {r["task_id"] for r in records}
    assert len(records) == 4 and tasks <= {f"task-{i:04d}" for i in range(4)}
    assert all(r["turns"] and r["stop_reason"] != "env_error" for r in records)


def test_agent_flag_errors_name_the_fix(tmp_path: Path) -> None:
    result = _agentrl(
        "train", "--env", "agent", *TINY, "--run-dir", str(tmp_path / "r"), cwd=tmp_path
    )
    assert result.returncode != 0
    assert "--env agent needs --agent MODULE:FUNCTION" in result.stderr
    result = _agentrl(
        "train",
        "--env",
        "agent",
        "--agent",
        "nosuchmodule:agent",
        *TINY,
        "--run-dir",
        str(tmp_path / "r2"),
        cwd=tmp_path,
    )
    assert result.returncode != 0 and "cannot import module 'nosuchmodule'" in result.stderr


def test_serve_records_an_episode_and_stops_on_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "served"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "serve",
            *TINY,
            "--port",
            "0",
            "--out",
            str(out),
            "--max-assistant-tokens",
            "8",
            "--max-trajectory-tokens",
            "1000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait(timeout=30)
            assert process.stderr is not None
            pytest.fail(f"agentrl serve exited: {process.stderr.read()[-3000:]}")
        assert line.startswith("serving tiny at http://127.0.0.1:"), line
        base = line.split(" at ")[1].split("/v1")[0]
        session = httpx.post(f"{base}/sessions", timeout=30).json()
        client = openai.OpenAI(base_url=session["base_url"], api_key="unused")
        reply = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Say hi."}], logprobs=True
        )
        choice = reply.choices[0]
        assert choice.logprobs is not None and len(choice.logprobs.content or []) >= 1
        assert reply.usage is not None and reply.usage.completion_tokens >= 1
        ended = httpx.post(f"{base}/sessions/{session['id']}/end", json={"reward": 0.5}, timeout=30)
        assert ended.json()["turns"] == 1
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 143
    finally:
        if process.poll() is None:
            process.kill()
    (record,) = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert record["reward"] == 0.5 and len(record["turns"]) == 1
    assert record["turns"][0]["logprobs"]
