"""`agentrl eval --env search --policy solver|nosearch`, `agentrl generate --env search`, a
user's data folder with `--data-root`, the policy errors, `agentrl envs`, and `agentrl train
--env search` with the tiny local model (2 updates)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.envs.search import generated_data


def _overall(path: Path) -> dict[str, float]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    record = next(r for r in lines if r["type"] == "summary" and r["split"] == "overall")
    stats: dict[str, float] = record["stats"]
    return stats


def test_eval_solver_and_nosearch_on_valid_unseen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["eval", "--env", "search", "--split", "valid_unseen"]
    solver, nosearch = tmp_path / "solver.jsonl", tmp_path / "nosearch.jsonl"
    assert main([*flags, "--policy", "solver", "--output", str(solver)]) == 0
    assert "solver: 100 episodes played" in capsys.readouterr().out
    stats = _overall(solver)
    assert stats["episodes"] == 100 and stats["success_rate"] >= 0.95
    assert main([*flags, "--policy", "nosearch", "--output", str(nosearch)]) == 0
    assert "nosearch: 100 episodes played" in capsys.readouterr().out
    assert _overall(nosearch)["success_rate"] <= 0.05  # the default backend needs no key here


def test_policy_errors_name_the_envs_that_have_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "x.jsonl")
    assert main(["eval", "--env", "toy", "--policy", "nosearch", "--output", out]) == 1
    error = capsys.readouterr().err
    assert "--policy nosearch plays search questions only with --env search" in error
    assert "--env toy offers --policy model" in error
    assert main(["eval", "--env", "search", "--policy", "planner", "--output", out]) == 1
    error = capsys.readouterr().err
    assert "--env alfworld" in error and "offers --policy model, solver, nosearch" in error
    assert main(["envs"]) == 0
    assert "baselines: --policy solver | nosearch (eval)" in capsys.readouterr().out


def test_generate_then_eval_the_written_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "data"
    assert main(["generate", "--env", "search", "--out", str(out), "--valid-unseen", "6"]) == 0
    printed = capsys.readouterr().out
    assert "corpus.jsonl (662 lines)" in printed and "valid_unseen.jsonl (6 lines)" in printed
    assert not (out / "train.jsonl").exists()
    docs = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    assert set(docs[0]) == {"id", "title", "text"}
    questions = [json.loads(line) for line in (out / "valid_unseen.jsonl").read_text().splitlines()]
    expected = generated_data(0).split("valid_unseen")[:6]
    assert [q["answers"] for q in questions] == [list(q.answers) for q in expected]

    result = tmp_path / "solver.jsonl"
    flags = ["eval", "--env", "search", "--policy", "solver", "--split", "valid_unseen"]
    assert main([*flags, "--data-root", str(out), "--output", str(result)]) == 0
    assert _overall(result)["episodes"] == 6 and _overall(result)["success_rate"] == 1.0
    capsys.readouterr()

    other = tmp_path / "seed1"
    assert main(["generate", "--env", "search", "--out", str(other), "--seed", "1"]) == 0
    assert "train.jsonl (1500 lines)" in capsys.readouterr().out
    assert (other / "corpus.jsonl").read_text() != (out / "corpus.jsonl").read_text()

    (out / "corpus.jsonl").write_text('{"id": "d1", "title": "A", "text": "a"}\n{"id": "d2"}\n')
    assert main([*flags, "--data-root", str(out), "--output", str(tmp_path / "bad.jsonl")]) == 1
    error = capsys.readouterr().err
    assert "corpus.jsonl:2: field 'title': Field required" in error and "Traceback" not in error


def test_train_on_search_with_the_tiny_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    args = ["train", "--env", "search", "--backend", "local", "--base-model", "tiny"]
    args += ["--device", "cpu", "--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
    args += ["--max-steps", "2", "--games-per-batch", "1", "--group-size", "2"]
    args += ["--lora-rank", "4", "--max-episode-steps", "2", "--run-dir", str(run_dir)]
    assert main(args) == 0
    assert (run_dir / "checkpoints" / "update-0002.json").is_file()
    out = capsys.readouterr().out
    assert "1500 training games (search, split train)" in out and "finished update 2 of 2" in out
