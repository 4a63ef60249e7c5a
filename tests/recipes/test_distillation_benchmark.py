"""`benchmarks/distillation.py` at the smoke size: a teacher checkpoint, then an RL and an
on-policy distillation student per seed, the summary, the curves and the last line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import BENCHMARKS

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = BENCHMARKS / "distillation.py"


@pytest.mark.slow  # a benchmark script's plumbing: `make test-slow`
def test_distillation_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "distillation"
    command = [sys.executable, str(SCRIPT), "--out", str(out), "--size", "smoke", "--seeds", "1"]
    command += ["--updates", "2", "--eval-every", "1", "--teacher-updates", "2"]
    command += ["--kl-coef", "0.1"]  # every student: KL to its warm start (a frozen copy)
    command += ["--opd-learning-rate", "1e-3"]  # the distilled student's own rate
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    pattern = (
        r"rl_updates_to_90=[\d.]+ opd_updates_to_90=[\d.]+ speedup=[\d.]+ seeds=1 "
        r"rl_reached=[01] opd_reached=[01] rft_updates_to_90=[\d.]+ rft_reached=[01]"
        r" imitate_updates_to_90=[\d.]+ imitate_reached=[01] opd_signal=teacher_tokens"
    )
    assert re.fullmatch(pattern, last), last
    assert list((out / "teacher" / "checkpoints").glob("update-0002.json"))
    for variant in ("rl", "opd", "rft", "imitate"):
        run = json.loads((out / "runs" / f"{variant}-seed0.json").read_text())
        assert [p["update"] for p in run["curve"]] == [0, 1, 2]
    opd = json.loads((out / "runs" / "opd-seed0.json").read_text())
    assert opd["setup"]["optim_substeps"] == 16  # the teacher-token signal's default
    assert opd["setup"]["kl_coef"] == 0.1
    assert opd["setup"]["learning_rate"] == 1e-3
    rl = json.loads((out / "runs" / "rl-seed0.json").read_text())
    assert rl["setup"]["learning_rate"] == opd["setup"]["learning_rate"] / 2  # the recipe's
    assert rl["setup"]["optim_substeps"] == 4
    summary = (out / "summary.md").read_text()
    assert "| rl | 0 |" in summary and "| opd | 0 |" in summary
    assert (out / "curves.png").stat().st_size > 0
    # one variant again: the others' runs are read back, the summary is whole again
    (out / "runs" / "imitate-seed0.json").unlink()
    again = subprocess.run(
        [*command, "--variants", "imitate"], capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.strip().splitlines()[-1] == last
    assert "| imitate | 0 |" in (out / "summary.md").read_text()
    # another task in the same --out: its teacher would be the wrong one, so it is refused
    fetch2 = [*command, "--task", "fetch2"]
    refused = subprocess.run(fetch2, capture_output=True, text=True, timeout=600, check=False)
    assert refused.returncode != 0
    assert "holds a teacher of another task (4 objects x 1 receptacles" in refused.stderr
    assert "not --task fetch2's 3 x 3" in refused.stderr


@pytest.mark.slow  # a benchmark script's plumbing: `make test-slow`
def test_distillation_benchmark_plays_the_two_decision_task(tmp_path: Path) -> None:
    """`--task fetch2`: teacher and students play 3 objects x 3 receptacles."""
    out = tmp_path / "fetch2"
    command = [sys.executable, str(SCRIPT), "--out", str(out), "--size", "smoke", "--seeds", "1"]
    command += ["--updates", "1", "--eval-every", "1", "--teacher-updates", "1"]
    command += ["--task", "fetch2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    teacher = json.loads((out / "teacher" / "result.json").read_text())
    assert (teacher["setup"]["objects"], teacher["setup"]["receptacles"]) == (3, 3)
    for variant in ("rl", "opd", "rft", "imitate"):
        setup = json.loads((out / "runs" / f"{variant}-seed0.json").read_text())["setup"]
        assert (setup["objects"], setup["receptacles"]) == (3, 3)
