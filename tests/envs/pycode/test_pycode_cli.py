"""`agentrl eval --env pycode --policy solver`, `agentrl generate --env pycode`, the viewer on
function-tool turns, and (slow) `agentrl train --env pycode` with the tiny local model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.envs.pycode import isolation, problem_for
from agentrl.reporting.records import read_eval_file
from agentrl.reporting.viewer import viewer_data


def test_solver_wins_valid_unseen_and_the_viewer_shows_its_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "solver.jsonl"
    flags = ["eval", "--env", "pycode", "--policy", "solver", "--split", "valid_unseen"]
    assert main([*flags, "--limit-per-split", "12", "--output", str(output)]) == 0
    assert "solver: 12 episodes played" in capsys.readouterr().out
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    overall = next(r for r in lines if r["type"] == "summary" and r["split"] == "overall")
    assert overall["stats"]["episodes"] == 12 and overall["stats"]["success_rate"] >= 0.95
    families = {r["trajectory"]["task_type"] for r in lines if r["type"] == "episode"}
    assert {"dates", "strings"} <= families  # the families train never sees

    data = viewer_data(read_eval_file(output))
    episodes = data["episodes"]
    assert isinstance(episodes, list) and isinstance(episodes[0], dict)
    turns = episodes[0]["turns"]
    assert isinstance(turns, list) and isinstance(turns[0], dict)
    (call,) = turns[0]["calls"]  # type: ignore[misc]
    assert call["name"] == "run_python" and "print('ANSWER:', answer)" in call["arguments"]["code"]
    assert call["output"].startswith("ANSWER: ")
    assert main(["view", str(output)]) == 0
    html = (tmp_path / "solver.html").read_text()
    assert "call-value" in html and "run_python" in html


def test_the_cli_refuses_strict_mode_where_the_host_lacks_it_and_runs_when_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No bubblewrap: `agentrl eval --env pycode` stops before playing, naming the fix;
    `--sandbox unsafe-processes` is the explicit way on."""
    isolation._probe.cache_clear()
    monkeypatch.setattr(isolation, "bwrap_path", lambda: None)
    output = tmp_path / "solver.jsonl"
    flags = ["eval", "--env", "pycode", "--policy", "solver", "--split", "valid_unseen"]
    flags += ["--limit-per-split", "2", "--output", str(output)]
    try:
        assert main(flags) == 1
        error = capsys.readouterr().err
        assert error.startswith("agentrl eval: error: the pycode sandbox cannot isolate")
        assert "apt-get install bubblewrap" in error and "--sandbox unsafe-processes" in error
        assert "internal error" not in error and not output.exists()
        assert main([*flags, "--sandbox", "unsafe-processes"]) == 0
        assert "solver: 2 episodes played" in capsys.readouterr().out
    finally:
        isolation._probe.cache_clear()


def test_generate_writes_task_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tasks"
    args = ["generate", "--env", "pycode", "--out", str(out), "--train", "8", "--valid-unseen", "4"]
    assert main(args) == 0
    assert "valid_unseen.jsonl" in capsys.readouterr().out
    train = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert len(train) == 8 and not (out / "valid_seen.jsonl").exists()
    for record in train:
        assert set(record) == {"task_id", "split", "family", "question", "answer", "code"}
        assert problem_for(record["task_id"]).answer == record["answer"]
    assert main(["generate", "--env", "pycode", "--out", str(out)]) == 1
    assert "--train" in capsys.readouterr().err


def test_planner_and_solver_refuse_the_other_env(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["eval", "--env", "toy", "--policy", "solver", "--output", str(tmp_path / "x.jsonl")]
    assert main(flags) == 1
    assert "--policy solver plays pycode tasks only" in capsys.readouterr().err


@pytest.mark.slow
def test_train_on_pycode_with_the_tiny_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    args = ["train", "--env", "pycode", "--backend", "local", "--base-model", "tiny"]
    args += ["--device", "cpu", "--max-assistant-tokens", "16", "--max-trajectory-tokens", "2000"]
    args += ["--max-steps", "1", "--games-per-batch", "1", "--group-size", "2"]
    args += ["--lora-rank", "4", "--max-episode-steps", "3", "--run-dir", str(run_dir)]
    assert main(args) == 0
    assert (run_dir / "checkpoints" / "update-0001.json").is_file()
    assert "finished update 1 of 1" in capsys.readouterr().out
