"""The learning test: RL through the Trainer lifts held-out success >= 30 points over random.

The fetch task (`agentrl.envs.toy.fetch`) is won only by reading the goal; a uniformly random
valid policy wins 1/4. The small from-scratch model (project tokenizer, full fine-tuning) is
warm-started on random valid play, then trained with the library's Trainer, GroupMean
advantages and the PPO loss (`agentrl.recipes.fetch.TEST`, about 3 minutes on a free core; a
seed measured to learn under both AVX-512 and AVX2 kernels). The test fails when learning
breaks: with the advantage sign flipped or the loss zeroed, held-out
success stays at or below the random level (checked by hand; see docs/estimators.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.paths import BENCHMARKS

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _smoke(tmp_path: Path, script: str, *choices: str) -> tuple[str, Path]:
    """Run `benchmarks/<script>` at the smoke size, one seed; its last line and output dir."""
    import subprocess
    import sys

    path = BENCHMARKS / script
    out = tmp_path / "bench"
    command = [sys.executable, str(path), "--out", str(out), "--size", "smoke", "--seeds", "1"]
    done = subprocess.run(
        [*command, *choices], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1], out


SUMMARY = (
    r"random_success=[\d.]+ success_before=[\d.]+ success_after=[\d.]+ seeds=1 minutes=[\d.]+"
    r" seeds_ok=[01]"
)


def test_benchmark_script_smoke(tmp_path: Path) -> None:
    """`benchmarks/learning.py` plumbing at the smoke size: runs, table, PNG, the last line;
    `--kl-coef` reaches the recipe, whose full fine-tuning then needs the frozen reference it
    takes after the warm start (without it the KL step is refused)."""
    import json
    import re

    last, out = _smoke(
        tmp_path,
        "learning.py",
        "--estimators",
        "group_mean",
        "gigpo",
        "--kl-coef",
        "0.1",
        "--lr-schedule",
        "linear",
        "--warmup-updates",
        "2",
    )
    assert re.fullmatch(SUMMARY, last), last
    assert (out / "learning.png").stat().st_size > 0
    assert "| gigpo | 1 |" in (out / "learning.md").read_text()
    run = json.loads((out / "runs" / "group_mean-seed0.json").read_text())
    assert run["setup"]["kl_coef"] == 0.1 and run["setup"]["lr_schedule"] == "linear"
    assert run["setup"]["warmup_updates"] == 2


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kl-coef", "-1"], "--kl-coef must be >= 0"),
        (["--warmup-updates", "-1"], "--warmup-updates must be >= 0"),
        (["--final-learning-rate", "1e-4"], "--final-learning-rate is the end of a schedule"),
    ],
)
def test_benchmark_script_refuses_bad_overrides_before_any_run(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    import subprocess
    import sys

    out = tmp_path / "bench"
    command = [sys.executable, str(BENCHMARKS / "learning.py"), "--out", str(out), *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
    assert not out.exists()  # refused before any run wrote anything


def test_learning_benchmark_defaults_to_the_robust_recipe() -> None:
    """`benchmarks/learning.py` without `--size` runs `ROBUST`, the setup measured on 10 of
    10 seeds (the plain recipe plus a KL penalty of 0.05 and 350 updates, nothing else)."""
    import subprocess
    import sys
    from dataclasses import replace

    from agentrl.learning import BENCHMARK, ROBUST

    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "learning.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "default: robust" in " ".join(done.stdout.split())
    assert replace(BENCHMARK, kl_coef=0.05, updates=350) == ROBUST
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import learning_runs
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert learning_runs.base_setup("robust", 4, None) == replace(ROBUST, seed=4)


@pytest.mark.slow  # a benchmark script's plumbing: `make test-slow`
def test_losses_script_smoke(tmp_path: Path) -> None:
    """`benchmarks/losses.py` at the smoke size: one off-policy loss and the on-policy PPO."""
    import json
    import re

    last, out = _smoke(tmp_path, "losses.py", "--losses", "cispo", "ppo_on_policy")
    assert re.fullmatch(SUMMARY, last), last
    assert "| cispo | 1 |" in (out / "losses.md").read_text()
    run = json.loads((out / "runs" / "cispo-seed0.json").read_text())
    assert run["setup"]["loss"] == "cispo" and run["setup"]["max_steps_off_policy"] == 1


def test_demo_learning_phase_smoke(tmp_path: Path) -> None:
    """The demo's phase 0 at the smoke size: a curve and a plot."""
    from agentrl.demo import _learning_phase
    from agentrl.learning import SMOKE

    result, plot = _learning_phase(tmp_path, SMOKE)
    assert [p.update for p in result.curve] == [0, 1, 2]
    assert plot.stat().st_size > 0


async def test_rl_beats_the_random_policy_on_held_out_games(tmp_path: Path) -> None:
    """Held-out success after RL >= random + 0.30, and above the warm start's."""
    import torch

    from agentrl.learning import TEST, fetch_tokenizer, run_learning

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        result = await run_learning(TEST, fetch_tokenizer(TEST), tmp_path / "run")
    finally:
        torch.set_num_threads(threads)
    curve = [round(p.success, 3) for p in result.curve]
    print(f"random {result.random_success:.3f} curve {curve} in {time.perf_counter() - start:.0f}s")
    assert 0.1 <= result.random_success <= 0.4  # about 1/4: the task is not won by chance
    assert result.before <= result.random_success + 0.15  # the warm start alone does not win
    assert result.after >= result.random_success + 0.30
    assert result.after >= result.before + 0.25
