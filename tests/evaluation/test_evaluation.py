"""Evaluation: the eval file, refusal to overwrite, resume, the CLI, the planner baseline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.envs.toy import make_toy_group, toy_tasks
from agentrl.evaluation import PlayFn, evaluate_tasks, model_player
from agentrl.metrics import OVERALL, eval_summaries
from agentrl.reporting.records import read_eval_file
from agentrl.rewards import WinMinusInvalid
from agentrl.rollout import RolloutConfig
from agentrl.testing import PolicySampler
from agentrl.types import TaskInfo, TrajectoryGroup
from tests.helpers.paths import REPO
from tests.helpers.trainer_helpers import PROTOCOL, toy_policy


def _tasks() -> list[TaskInfo]:
    return toy_tasks(3, seed=100, split="valid_seen") + toy_tasks(3, seed=200, split="valid_unseen")


def _player(tokenizer: Any, samples: int = 1) -> PlayFn:
    return model_player(
        env_factory=make_toy_group,
        sampler=PolicySampler(tokenizer, toy_policy(3)),
        renderer=ChatRenderer(tokenizer, PROTOCOL.tools),
        protocol=PROTOCOL,
        rollout=RolloutConfig(group_size=samples, max_env_steps=6),
        reward_fn=WinMinusInvalid(),
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_eval_file_layout_and_summaries(tmp_path: Path, qwen_tokenizer: Any) -> None:
    out = tmp_path / "eval.jsonl"
    tasks = _tasks()
    outcome = await evaluate_tasks(
        tasks,
        _player(qwen_tokenizer, samples=2),
        out,
        label="base",
        samples_per_game=2,
        games_per_batch=4,
        run_config={"split": "all"},
        progress=False,
    )
    lines = _lines(out)
    assert lines[0] == {"type": "run", "version": 2, "label": "base", "config": {"split": "all"}}
    episodes = [x for x in lines if x["type"] == "episode"]
    assert len(episodes) == 12 == outcome.played
    assert {e["episode_id"] for e in episodes} == {
        f"{t.split}/{t.task_id}#{s}" for t in tasks for s in (0, 1)
    }
    record = episodes[0]["trajectory"]
    assert record["schema_version"] == 1 and record["messages"][0]["role"] == "system"
    assert {"action", "status", "observation", "tool_message"} <= set(record["turns"][0])
    summaries = [x for x in lines if x["type"] == "summary"]
    assert [s["split"] for s in summaries] == ["valid_seen", "valid_unseen", OVERALL]
    assert summaries[-1]["stats"]["episodes"] == 12
    assert "toy_carry" in summaries[-1]["per_task_type"]
    data = read_eval_file(out)
    assert data.label == "base"
    recomputed = {s.split: s for s in eval_summaries(e.trajectory for e in data.episodes)}
    assert recomputed == data.summaries == {s.split: s for s in outcome.summaries}
    assert 0 < data.summaries[OVERALL].stats.tool_format_rate < 1  # the policy mixes both

    with pytest.raises(FileExistsError, match="--resume"):
        await evaluate_tasks(tasks, _player(qwen_tokenizer), out, label="x", progress=False)
    assert _lines(out) == lines  # untouched
    again = await evaluate_tasks(
        tasks[:1], _player(qwen_tokenizer), out, label="y", overwrite=True, progress=False
    )
    assert again.played == 1 and len(_lines(out)) == 1 + 1 + 2


async def test_resume_finishes_without_replaying(tmp_path: Path, qwen_tokenizer: Any) -> None:
    out, tasks = tmp_path / "eval.jsonl", _tasks()
    inner = _player(qwen_tokenizer)
    settings: dict[str, Any] = {"temperature": 0.01}
    played: list[str] = []
    written = asyncio.Event()

    async def play(task: TaskInfo) -> TrajectoryGroup:
        played.append(task.task_id)
        if len(played) == 3:
            written.set()
            await asyncio.sleep(3600)  # the third game hangs until the interrupt
        return await inner(task)

    run = asyncio.ensure_future(
        evaluate_tasks(tasks, play, out, label="m", games_per_batch=1, run_config=settings)
    )
    await written.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    before = out.read_text()
    assert [x["type"] for x in _lines(out)] == ["run", "episode", "episode"]
    played.clear()
    outcome = await evaluate_tasks(
        tasks, inner_counting(inner, played), out, label="m", resume=True, run_config=settings
    )
    assert (outcome.played, outcome.skipped) == (4, 2)
    assert played == [t.task_id for t in tasks[2:]]
    assert out.read_text().startswith(before)
    data = read_eval_file(out)
    assert len(data.episodes) == 6 and data.summaries[OVERALL].stats.episodes == 6
    # resuming with other settings is refused
    with pytest.raises(ValueError, match="other settings"):
        await evaluate_tasks(
            tasks, inner, out, label="m", resume=True, run_config={"temperature": 1.0}
        )


def inner_counting(inner: PlayFn, played: list[str]) -> PlayFn:
    """`inner`, recording the games it is asked to play."""

    async def play(task: TaskInfo) -> TrajectoryGroup:
        played.append(task.task_id)
        return await inner(task)

    return play


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentrl.cli", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


@pytest.mark.slow
def test_cli_eval_interrupted_by_ctrl_c_then_resumed(tmp_path: Path) -> None:
    """A real `agentrl eval` process (tiny model) stopped by SIGINT, then `--resume`d."""
    pytest.importorskip("torch")
    out = tmp_path / "base.jsonl"
    flags = [
        "eval", "--env", "toy", "--backend", "local", "--base-model", "tiny", "--device", "cpu",
        "--split", "all", "--limit-per-split", "6", "--games-per-batch", "1",
        "--max-assistant-tokens", "48", "--max-trajectory-tokens", "2000", "--output", str(out),
    ]  # fmt: skip
    process = subprocess.Popen(
        _cli(*flags), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if out.is_file() and out.read_text().count('"type": "episode"') >= 2:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the evaluation ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    assert "--resume" in err
    first = [x["episode_id"] for x in _lines(out) if x["type"] == "episode"]
    assert 2 <= len(first) < 12

    again = subprocess.run(_cli(*flags), env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "already exists" in again.stderr

    done = subprocess.run(
        _cli(*flags, "--resume"), env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{12 - len(first)} episodes played, {len(first)} resumed" in done.stdout
    ids = [x["episode_id"] for x in _lines(out) if x["type"] == "episode"]
    assert ids[: len(first)] == first and len(ids) == len(set(ids)) == 12
    assert read_eval_file(out).summaries[OVERALL].stats.episodes == 12


@pytest.mark.parametrize("window", [[], ["--context-window", "1"]], ids=["whole", "window-1"])
def test_cli_planner_baseline_wins_generated_games(
    tmp_path: Path, alfworld_games: Any, window: list[str]
) -> None:
    """The planner wins every game, also when a context window cuts its prompts (its replies
    follow the plan by the requests' keyed turns, not by what the prompts hold)."""
    out = tmp_path / "planner.jsonl"
    flags = ["eval", "--policy", "planner", "--data-root", str(alfworld_games.root), *window]
    result = subprocess.run(
        _cli(*flags, "--split", "all", "--limit-per-split", "1", "--output", str(out)),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    data = read_eval_file(out)
    assert data.label == "planner"
    overall = data.summaries[OVERALL].stats
    assert overall.episodes == 2 and overall.success_rate == 1.0
    assert overall.mean_turns >= 3  # under a window of one turn, the third prompt is cut
    assert overall.tool_format_rate == 1.0 and overall.mean_invalid_actions == 0.0
    assert set(data.summaries) == {"valid_seen", "valid_unseen", OVERALL}
    assert "planner" in result.stdout and "100.00%" in result.stdout
