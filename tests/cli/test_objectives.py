"""`agentrl train --objective opd|rft`, `agentrl rft` and their help, on the tiny model."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from agentrl.cli.app import main

pytest.importorskip("torch")
pytest.importorskip("peft")

SMALL = ["--env", "toy", "--base-model", "tiny", "--device", "cpu", "--max-steps", "1"]
SMALL += ["--max-episode-steps", "2", "--max-assistant-tokens", "16", "--group-size", "2"]


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(list(argv))
        except SystemExit as exc:  # a flag error: argparse's exit 2
            status = int(exc.code or 0)
    return status, out.getvalue()


def _last_metrics(run_dir: Path) -> dict[str, object]:
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])


def _opd(teacher: Path, run_dir: Path, *flags: str) -> tuple[int, str]:
    """`agentrl train --objective opd` of a seed-7 student of `teacher` (a checkpoint record)."""
    argv = ["train", *SMALL, "--objective", "opd", "--teacher-model", str(teacher)]
    return _run(*argv, "--seed", "7", "--run-dir", str(run_dir), *flags)


def _move_adapter(checkpoint: Path) -> None:
    """Give a checkpoint's LoRA adapter non-zero B matrices (seeded), so that the model it
    makes differs from the tiny base: a one-update run of the random tiny model has only
    degenerate groups, and its adapter (B = 0) would leave the teacher equal to the student
    (every tiny model shares the base weights, `TINY_MODEL_SEED`)."""
    import torch
    from safetensors.torch import load_file, save_file

    generator = torch.Generator().manual_seed(0)
    for part in ("state", "sampler"):
        path = checkpoint / part / "adapter_model.safetensors"
        tensors = load_file(str(path))
        moved = {
            name: tensor + 0.05 * torch.randn(tensor.shape, generator=generator)
            if "lora_B" in name
            else tensor
            for name, tensor in tensors.items()
        }
        assert moved.keys() == tensors.keys() and any("lora_B" in n for n in moved)
        save_file(moved, str(path))


def test_train_objective_opd_distils_a_teacher_checkpoint(tmp_path: Path) -> None:
    status, out = _run("train", *SMALL, "--run-dir", str(tmp_path / "teacher"))
    assert status == 0, out
    record = tmp_path / "teacher" / "checkpoints" / "update-0001.json"
    _move_adapter(tmp_path / "teacher" / "checkpoints" / "update-0001")
    student = tmp_path / "student"
    status, out = _opd(record, student, "--teacher-advantage-clip", "0.5")
    assert status == 0, out
    assert "objective opd: teacher" in out and "loss importance_sampling" in out
    assert "advantage clip 0.5" in out
    backend = _last_metrics(student)["backend"]
    assert isinstance(backend, dict)
    assert abs(float(backend["distill/reverse_kl"])) > 1e-4  # the teacher's adapter moved
    assert backend["distill/teacher_logprob"] < 0.0
    labelled = tmp_path / "labelled"
    status, out = _opd(record, labelled, "--teacher-signal", "teacher_tokens")
    assert status == 0, out
    assert "signal teacher_tokens" in out
    backend = _last_metrics(labelled)["backend"]
    assert isinstance(backend, dict) and "distill/reverse_kl" not in backend
    assert 0.0 <= float(backend["distill/agreement"]) < 1.0


def test_objective_errors_name_the_flag(tmp_path: Path) -> None:
    status, out = _run("train", *SMALL, "--objective", "opd", "--run-dir", str(tmp_path))
    assert status == 2 and "--objective opd needs --teacher-model" in out
    status, out = _run("train", *SMALL, "--teacher-advantage-clip", "0", "--run-dir", "x")
    assert status == 2 and "teacher_advantage_clip" in out.replace("-", "_"), out
    status, out = _run("train", *SMALL, "--teacher-signal", "teacher_tokens", "--run-dir", "x")
    assert status == 2 and "--teacher-signal teacher_tokens needs --objective opd" in out
    argv = ["train", *SMALL, "--objective", "opd", "--teacher-model", "t.json"]
    status, out = _run(*argv, "--teacher-signal", "teacher_tokens", "--teacher-reward-coef", "1")
    assert status == 2 and "leave out --teacher-reward-coef" in out, out
    missing = str(tmp_path / "none.json")
    argv = ["train", *SMALL, "--objective", "opd", "--teacher-model", missing]
    status, out = _run(*argv, "--run-dir", str(tmp_path / "run"))
    assert status == 1 and "none.json: no such checkpoint" in out


def test_rft_runs_an_update(tmp_path: Path) -> None:
    status, out = _run("rft", *SMALL, "--run-dir", str(tmp_path / "rft"))
    assert status == 0, out
    backend = _last_metrics(tmp_path / "rft")["backend"]
    assert isinstance(backend, dict) and "rft/kept" in backend


@pytest.mark.parametrize("command", ["sft", "rft", "train"])
def test_help(command: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([command, "--help"])
    text = out.getvalue()
    assert text.startswith(f"usage: agentrl {command}")
    assert ("--objective" in text) == (command == "train")
