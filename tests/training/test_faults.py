"""Fault injection: the real `agentrl` CLI stopped by signals, locked out, on a full disk.

Every test runs `python -m agentrl.cli` in a subprocess (this worktree's code) and checks what
the issue promises: after SIGINT / SIGTERM / SIGKILL and `--resume`, each update is recorded
exactly once in metrics.jsonl and rollouts.jsonl, every line parses, the final checkpoint
loads and the games are those of an uninterrupted run; a second writer is refused naming the
holder; a full disk is one error line naming the path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrl.trainer import task_batch
from tests.helpers.fault_helpers import (
    EVAL,
    TRAIN,
    agentrl,
    cli_env,
    metric_steps,
    one_error_line,
    rollout_games,
    start,
    wait_for_lines,
)

pytest.importorskip("torch")


def expected_games(updates: int, games: int = 2, seed: int = 42) -> list[tuple[int, str]]:
    """(update, task id) of an uninterrupted toy run: a pure function of the seed."""
    from agentrl.envs.toy import toy_tasks
    from agentrl.recipe import TOY_TRAIN_GAMES

    tasks = toy_tasks(TOY_TRAIN_GAMES, seed=0, split="train")
    return [
        (n, t.task_id) for n in range(1, updates + 1) for t in task_batch(tasks, games, seed, n - 1)
    ]


def check_finished_run(run_dir: Path, updates: int) -> None:
    """Each update once in both files, the uninterrupted run's games, a loadable checkpoint."""
    from agentrl import recipe
    from agentrl.checkpoints import latest_checkpoint
    from agentrl.config import TrainConfig

    assert metric_steps(run_dir) == list(range(1, updates + 1))
    assert rollout_games(run_dir) == expected_games(updates)
    latest = latest_checkpoint(run_dir)
    assert latest is not None and latest.update == updates
    config = TrainConfig(base_model="tiny", backend="local", device="cpu", env="toy")
    tokenizer = recipe.tokenizer_for(config)
    backend = recipe.local_backend_for(config, tokenizer, run_dir / "unused", lora_rank=4)
    asyncio.run(backend.load(latest.ref))  # validated, then loaded into the model
    assert backend.steps == updates or backend.steps <= updates


def interrupt_and_resume(
    tmp_path: Path,
    sig: signal.Signals,
    delay: float,
    *,
    background: bool,
    save_every: int,
    updates: int = 14,
) -> str:
    """Start a run, send `sig` `delay` s after its first update, resume it to `updates`."""
    run_dir = tmp_path / "run"
    flags = [*TRAIN, "--run-dir", str(run_dir), "--save-every", str(save_every)]
    process = start(tmp_path, *flags, "--max-steps", "400", background=background)
    wait_for_lines(process, run_dir / "metrics.jsonl", 1, limit=240)
    time.sleep(delay)
    process.send_signal(sig)
    _, err = process.communicate(timeout=240)
    if sig is signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:
        assert process.returncode == 128 + sig, err[-3000:]
        assert "Traceback" not in err and "--resume" in err, err[-3000:]
        assert "is saved" in err, err[-3000:]
    stopped = len(metric_steps(run_dir)) if (run_dir / "metrics.jsonl").exists() else 0
    updates = max(updates, stopped + 2)
    resumed = agentrl(tmp_path, *flags, "--max-steps", str(updates), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    check_finished_run(run_dir, updates)
    return err


def test_sigterm_in_the_background_saves_and_resumes_each_update_once(tmp_path: Path) -> None:
    err = interrupt_and_resume(
        tmp_path, signal.SIGTERM, 0.3, background=True, save_every=1000, updates=4
    )
    assert "SIGTERM received" in err


def test_sigterm_during_a_long_local_rollout_stops_the_generation(tmp_path: Path) -> None:
    """SIGTERM one second into update 2's rollout (one batch of 400-token replies on the local
    backend): the generation thread stops before its next decoding step, so the command exits
    with 143 well before that rollout could have finished (and within 10 s), with update 1's
    checkpoint; the resumed run records each update once."""
    run_dir = tmp_path / "run"
    long_replies = ["--max-assistant-tokens", "400", "--max-trajectory-tokens", "1000"]
    flags = [*TRAIN, *long_replies, "--max-episode-steps", "1", "--save-every", "1"]
    flags += ["--run-dir", str(run_dir)]
    process = start(tmp_path, *flags, "--max-steps", "3")
    wait_for_lines(process, run_dir / "metrics.jsonl", 1, limit=240)
    first = json.loads((run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0])
    rollout = float(first["timings"]["rollout"])  # one batch: what an unstopped one costs
    time.sleep(1.0)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=240)
    latency = time.monotonic() - sent
    assert process.returncode == 143, err[-3000:]
    assert "checkpoint update-0001 is saved" in err, err[-3000:]
    assert latency < min(10.0, rollout - 1.5), (latency, rollout)
    resumed = agentrl(tmp_path, *flags, "--max-steps", "2", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    check_finished_run(run_dir, 2)


def test_sigkill_then_resume_drops_the_updates_after_the_checkpoint(tmp_path: Path) -> None:
    interrupt_and_resume(tmp_path, signal.SIGKILL, 0.5, background=False, save_every=3, updates=6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_signal_at_a_seeded_random_point_then_resume(tmp_path: Path, seed: int) -> None:
    """SIGINT / SIGTERM / SIGKILL at random moments (rollout, training, saving), then resume."""
    rng = random.Random(seed)
    sig = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)[seed % 3]
    interrupt_and_resume(
        tmp_path,
        sig,
        rng.uniform(0.0, 1.5),
        background=seed % 2 == 1,
        save_every=rng.choice((1, 3)),  # every update saves: signals often land in a save
    )


@pytest.mark.slow
def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    flags = [*TRAIN, "--run-dir", str(run_dir), "--save-every", "1"]
    process = start(tmp_path, *flags, "--max-steps", "400")
    wait_for_lines(process, run_dir / "metrics.jsonl", 2, limit=240)
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-3000:]
    assert "exiting now" in err or "is saved" in err, err[-3000:]
    stopped = len(metric_steps(run_dir))
    resumed = agentrl(tmp_path, *flags, "--max-steps", str(stopped + 2), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    check_finished_run(run_dir, stopped + 2)


# -- a second writer -------------------------------------------------------------------------

HOLD = """
import sys, time
from pathlib import Path
from agentrl.reporting.lock import OutputLock
lock = OutputLock(Path(sys.argv[1]), folder=sys.argv[2] == "folder").acquire()
print("locked", flush=True)
time.sleep(120)
"""


def hold_lock(tmp_path: Path, target: Path, folder: bool) -> subprocess.Popen[str]:
    """Another process holding `target`'s lock (as a running agentrl command does)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(target), "folder" if folder else "file"],
        env=cli_env(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "locked"
    return process


def test_a_second_writer_is_refused_and_a_dead_holders_lock_is_taken_over(
    tmp_path: Path,
) -> None:
    output = tmp_path / "e.jsonl"
    first = agentrl(tmp_path, *EVAL, "--output", str(output))
    assert first.returncode == 0, first.stderr[-3000:]
    holder = hold_lock(tmp_path, output, folder=False)
    try:
        for extra in ("--overwrite-output", "--resume"):
            refused = agentrl(tmp_path, *EVAL, "--output", str(output), extra)
            one_error_line(refused, str(output), f"in use by process {holder.pid}")
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind, the lock itself is gone
        holder.wait()
    assert (tmp_path / "e.jsonl.lock").is_file()
    again = agentrl(tmp_path, *EVAL, "--output", str(output), "--overwrite-output")
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (tmp_path / "e.jsonl.lock").exists()

    run_dir = tmp_path / "run"
    holder = hold_lock(tmp_path, run_dir, folder=True)
    try:
        refused = agentrl(tmp_path, *TRAIN, "--run-dir", str(run_dir), "--resume")
        one_error_line(refused, str(run_dir), f"in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_two_evaluations_of_one_file_at_once(tmp_path: Path) -> None:
    output = tmp_path / "e.jsonl"
    long_eval = [*EVAL[:-1], "16", "--games-per-batch", "1", "--output", str(output)]
    first = start(tmp_path, *long_eval)
    wait_for_lines(first, output, 2, limit=240)
    second = agentrl(tmp_path, *long_eval, "--overwrite-output")
    one_error_line(second, "in use by process")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]


# -- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (skipped where this process may not mount one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_is_one_error_line_naming_the_path(tmp_path: Path, small_disk: Path) -> None:
    run_dir = small_disk / "run"  # a checkpoint of the tiny model does not fit in 2 MiB
    train = agentrl(tmp_path, *TRAIN, "--run-dir", str(run_dir), "--max-steps", "1")
    one_error_line(train, str(run_dir / "checkpoints" / "update-0001"), "No space left")
    assert not list((run_dir / "checkpoints").glob(".update-0001.tmp*")), "temporary files left"

    shutil.rmtree(run_dir)
    filler = (small_disk / "filler").open("ab", buffering=0)
    with filler as handle, contextlib.suppress(OSError):  # fill it to the last block
        while True:
            handle.write(b"\0" * 4096)
    output = small_disk / "e.jsonl"
    evaluation = agentrl(tmp_path, *EVAL, "--output", str(output))
    one_error_line(evaluation, str(output), "No space left")
