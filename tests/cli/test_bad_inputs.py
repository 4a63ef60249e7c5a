"""Every bad input of issue 18: one `error:` line naming the file / field / flag, no traceback.

Most run `agentrl.cli.main` in this process (a traceback would be an exception escaping it);
one runs the command in a subprocess to see exactly what a user sees.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.cli import main
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.evaluation import evaluate_tasks
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.types import Completion, CompletionStop, StopReason, TaskInfo, TrajectoryGroup
from tests.helpers.fault_helpers import EVAL, SMALL, TRAIN, agentrl, metric_steps, one_error_line

pytest.importorskip("torch")


def error_of(capsys: pytest.CaptureFixture[str], argv: Sequence[str], status: int = 1) -> str:
    """The single error line `agentrl ARGV` prints (and its exit status)."""
    capsys.readouterr()
    if status == 2:
        with pytest.raises(SystemExit) as exc:
            main(list(argv))
        assert exc.value.code == 2
    else:
        assert main(list(argv)) == status
    lines = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-update run of the tiny model, a checkpoint per update."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    assert main([*TRAIN, "--run-dir", str(run_dir), "--max-steps", "2", "--save-every", "1"]) == 0
    return run_dir


@pytest.fixture
def run_dir(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run (its checkpoint records point into the copy)."""
    copy = Path(shutil.copytree(trained, tmp_path / "run"))
    for record in (copy / "checkpoints").glob("*.json"):
        record.write_text(record.read_text().replace(str(trained), str(copy)))
    return copy


def cut(path: Path) -> None:
    """Cut a file in half, as a crash or a full disk during its write would."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def sampler_path(run_dir: Path, name: str) -> Path:
    return run_dir / "checkpoints" / name / "sampler"


def test_a_cut_adapter_behind_model_path(run_dir: Path, tmp_path: Path) -> None:
    weights = sampler_path(run_dir, "update-0002") / "adapter_model.safetensors"
    cut(weights)
    record = run_dir / "checkpoints" / "update-0002.json"
    result = agentrl(tmp_path, *EVAL, "--model-path", str(record), "--output", "e.jsonl")
    one_error_line(result, str(weights), "cut")


def test_an_adapter_config_without_r(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = sampler_path(run_dir, "update-0001") / "adapter_config.json"
    settings = json.loads(config.read_text())
    del settings["r"]
    config.write_text(json.dumps(settings))
    folder = str(run_dir / "checkpoints" / "update-0001")
    line = error_of(capsys, [*EVAL, "--model-path", folder, "--output", str(run_dir / "e.jsonl")])
    assert str(config) in line and '"r"' in line


def test_resume_from_a_damaged_checkpoint_offers_then_takes_the_previous(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = run_dir / "checkpoints" / "update-0002" / "state" / "adapter_model.safetensors"
    cut(state)
    (run_dir / "metrics.jsonl").open("a").write('{"type": "train", "st')  # a cut line too
    resume = [*TRAIN, "--run-dir", str(run_dir), "--max-steps", "3", "--resume"]
    line = error_of(capsys, resume)
    assert str(state) in line and "--resume-fallback" in line and "update-0001" in line
    assert main([*resume, "--resume-fallback"]) == 0
    assert metric_steps(run_dir) == [1, 2, 3]
    assert (run_dir / "checkpoints" / "update-0002.json.damaged").is_file()


def test_cut_last_lines_of_metrics_and_rollouts_are_dropped_on_resume(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_dir / "metrics.jsonl").open("a").write('{"type": "train", "step": 3, "ti')
    (run_dir / "rollouts.jsonl").open("a").write('{"schema_version": 1, "group_id": "0:to')
    assert main([*TRAIN, "--run-dir", str(run_dir), "--max-steps", "3", "--resume"]) == 0
    assert metric_steps(run_dir) == [1, 2, 3]
    from tests.helpers.fault_helpers import rollout_games

    assert [u for u, _ in rollout_games(run_dir)] == [1, 1, 2, 2, 3, 3]


def test_a_cut_eval_file_resumes_and_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "e.jsonl"
    assert main([*EVAL, "--output", str(output)]) == 0
    lines = output.read_text().splitlines(keepends=True)
    episodes = [line for line in lines if '"type": "episode"' in line]
    kept = [*lines[: lines.index(episodes[-1])], episodes[-1][:40]]
    output.write_text("".join(kept))  # a crash during the last episode's write
    capsys.readouterr()
    assert main([*EVAL, "--output", str(output), "--resume"]) == 0
    out = capsys.readouterr()
    assert out.err.count("incomplete last record") == 1, out.err
    assert "1 episodes played, 2 resumed" in out.out
    for line in output.read_text().splitlines():
        json.loads(line)


def test_a_bad_run_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run_dir / "run.json").write_text("{")
    line = error_of(capsys, [*TRAIN, "--run-dir", str(run_dir), "--max-steps", "3", "--resume"])
    assert str(run_dir / "run.json") in line and "not valid JSON" in line


def test_a_token_budget_smaller_than_the_first_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget = ["--max-trajectory-tokens", "100"]
    line = error_of(capsys, [*TRAIN, *budget, "--run-dir", str(tmp_path / "r"), "--max-steps", "1"])
    assert "--max-trajectory-tokens 100 is smaller than the first prompt" in line
    assert not (tmp_path / "r" / "run.json").exists()  # fixing the flag needs no --resume
    line = error_of(capsys, [*EVAL, *budget, "--output", str(tmp_path / "e.jsonl")])
    assert "smaller than the first prompt" in line


def test_view_refuses_a_file_that_is_not_an_eval(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("metrics.jsonl", "rollouts.jsonl"):
        line = error_of(capsys, ["view", str(trained / name), "--out", str(tmp_path / "v.html")])
        assert "not an agentrl eval file" in line and name in line
    assert not (tmp_path / "v.html").exists()


def test_a_non_utf8_eval_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "e.jsonl"
    bad.write_bytes(b'{"type": "run"}\n\xff\xfe\n')
    assert f"{bad}:2: not UTF-8" in error_of(capsys, ["view", str(bad)])
    assert f"{bad}:2: not UTF-8" in error_of(capsys, [*EVAL, "--output", str(bad), "--resume"])


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (
            ["eval", "--policy", "planner", "--data-root", "FILE", "--output", "o.jsonl"],
            ["--data-root", "is a file, not a folder"],
        ),
        ([*TRAIN, "--learning-rate", "inf"], ["--learning-rate", "finite"]),
        ([*TRAIN, "--temperature", "nan"], ["--temperature", "finite"]),
        ([*TRAIN, "--run-dir", "FILE"], ["--run-dir", "is a file, not a run folder"]),
        (["eval", *SMALL, "--output", "DIR.jsonl"], ["--output", "is a folder, not a .jsonl"]),
        (["eval", *SMALL, "--output", "o.jsonl", "--retry-errors"], ["needs resume"]),
    ],
)
def test_bad_flags_name_the_flag(
    argv: list[str],
    needles: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("not a folder")
    (tmp_path / "DIR.jsonl").mkdir()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize("timeout", [0.0, -1.0, math.inf, math.nan])
def test_sample_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ValueError, match="sample_timeout must be a positive number"):
        RolloutConfig(sample_timeout=timeout)


class _FaultySampler:
    """Returns one fixed, malformed completion for every request."""

    def __init__(self, tokens: tuple[int, ...], logprobs: tuple[float, ...]) -> None:
        self.completion = Completion(tokens, logprobs, CompletionStop.STOP)
        self.calls = 0

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        self.calls += 1
        return [self.completion] * num_samples


@pytest.mark.parametrize(
    ("tokens", "logprobs", "needle"),
    [
        ((-1,), (-0.5,), "token id -1"),
        ((10**12,), (-0.5,), "token id 1000000000000"),
        ((151_669,), (-0.5,), "outside the tokenizer's range"),
        ((100,), (math.nan,), "invalid logprob nan"),
        ((100,), (math.inf,), "invalid logprob inf"),
    ],
)
async def test_sampler_faults_are_recorded_never_raised(
    qwen_tokenizer: Any, tokens: tuple[int, ...], logprobs: tuple[float, ...], needle: str
) -> None:
    protocol = toy_tool_protocol()
    sampler = _FaultySampler(tokens, logprobs)
    group = await rollout_group(
        toy_tasks(1, seed=0)[0],
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=ChatRenderer(qwen_tokenizer, protocol.tools),
        protocol=protocol,
        config=RolloutConfig(group_size=2, sampler_retries=1, retry_backoff=0.0),
    )
    assert sampler.calls == 2  # a malformed answer is retried like an exception
    for trajectory in group.trajectories:
        assert trajectory.stop_reason is StopReason.SAMPLER_ERROR
        assert trajectory.error is not None and needle in trajectory.error


async def test_env_errors_are_counted_and_retried_on_resume(tmp_path: Path) -> None:
    tasks = toy_tasks(3, seed=0, split="valid_seen")
    broken = {tasks[1].task_id}

    async def play(task: TaskInfo) -> TrajectoryGroup:
        if task.task_id in broken:
            raise RuntimeError("the game server went away")
        from agentrl.evaluation.run import _failed_group

        group = _failed_group(task, 1, RuntimeError("unused"))
        trajectory = group.trajectories[0]
        from dataclasses import replace

        return replace(group, trajectories=(replace(trajectory, stop_reason=StopReason.MAX_STEPS),))

    output = tmp_path / "e.jsonl"
    first = await evaluate_tasks(tasks, play, output, label="x", progress=False)
    assert first.summaries[-1].stats.errors == 1
    from agentrl.reporting.sinks import format_table

    assert "errors" in format_table(first.summaries).splitlines()[0]
    broken.clear()
    again = await evaluate_tasks(
        tasks, play, output, label="x", progress=False, resume=True, retry_errors=True
    )
    assert (again.played, again.skipped) == (1, 2)
    assert again.summaries[-1].stats.errors == 0 and again.summaries[-1].stats.episodes == 3


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.jsonl")
    for argv in (["--debug", "view", missing], ["view", missing, "--debug"]):
        with pytest.raises(FileNotFoundError):
            main(argv)


@pytest.mark.parametrize("timeout", ["0", "-3", "inf"])
def test_generate_timeout_must_be_positive(
    timeout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--out", str(tmp_path), "--train", "1", "--timeout", timeout]
    assert "--timeout must be a positive number" in error_of(capsys, argv)
