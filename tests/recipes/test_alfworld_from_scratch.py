"""`benchmarks/alfworld_from_scratch.py` at its CPU smoke size, end to end on generated games.

Games, explorer demonstrations through the rollout engine, the project tokenizer, imitation
steps, evaluation, one Trainer update, evaluation again, the JSON / markdown results and the
last line. About 15 s of CPU (more wall time on a busy machine); the GPU size is documented
in docs/alfworld.md.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrl.reporting.records import read_eval_file
from tests.helpers.paths import BENCHMARKS
from tests.helpers.processes import alive

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = BENCHMARKS / "alfworld_from_scratch.py"


def test_alfworld_from_scratch_smoke(alfworld_games: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [sys.executable, str(SCRIPT), "--size", "cpu-smoke", "--out", str(out)]
    command += ["--data-root", str(alfworld_games.root)]
    command += ["--context-window", "2", "--context-slack", "1"]  # every phase under a window
    command += ["--updates", "2", "--eval-every", "1"]  # a held-out point between the two
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    pattern = r"success_before_rl=[\d.]+ success_after_rl=[\d.]+ minutes=[\d.]+ device=cpu"
    assert re.fullmatch(pattern, last), last
    result = json.loads((out / "result.json").read_text())
    assert result["explorer_train"]["episodes"] == 4  # six train games, two kept for RL
    assert result["explorer_train"]["success"] > 0  # the explorer wins some within 12 steps
    assert result["explorer_train"]["invalid_per_turn"] < 0.2
    assert result["demos"] == 4 and result["sft_tokens"] > result["demo_tokens"] / 2
    losses = result["sft_loss"]
    assert len(losses) == result["setup"]["sft_steps"] and losses[-1] < losses[0]  # it learns
    assert result["before_rl"]["episodes"] == result["after_rl"]["episodes"] == 2
    assert len(result["train_success"]) == result["setup"]["updates"] == 2
    assert result["parameters"] > 0 and set(result["seconds"]) >= {"imitation", "rl", "total"}
    assert "| model after RL (valid_unseen) |" in (out / "result.md").read_text()
    lines = (out / "run" / "metrics.jsonl").read_text().splitlines()  # each RL update's metrics
    records = [json.loads(line) for line in lines]
    assert [(r["type"], r["step"]) for r in records] == [("train", 1), ("train", 2)]
    setup = result["setup"]
    assert (setup["context_window"], setup["context_slack"]) == (2, 1)
    assert (out / "run" / "checkpoints" / "update-0002.json").is_file()  # the trained model
    # the planner (it reads each game's solution) wins every generated game: the ceiling
    assert result["planner_eval"]["success"] == 1.0 and result["planner_eval"]["episodes"] == 2
    assert "| planner (valid_unseen) | 1.000 |" in (out / "result.md").read_text()
    curve = result["curve"]  # before RL, after update 1 (--eval-every 1), after RL
    assert [p["update"] for p in curve] == [0, 1, 2]
    assert curve[0]["score"] == result["before_rl"] and curve[-1]["score"] == result["after_rl"]
    files = [Path(p) for p in result["eval_files"]]
    assert [p.name for p in files] == ["planner.jsonl", "imitation.jsonl", "update-0002.jsonl"]
    for path, score in zip(files, ("planner_eval", "before_rl", "after_rl"), strict=True):
        summary = read_eval_file(path).summaries["overall"].stats  # every episode recorded
        assert (summary.episodes, summary.success_rate) == (2, result[score]["success"])
    plots = {p.name for p in (out / "plots").iterdir()}
    assert {"alfworld.png", "success_by_split.png"} <= plots


CPU_SCRIPT = BENCHMARKS / "alfworld_cpu.py"


def test_alfworld_cpu_benchmark_summarises_its_seeds(alfworld_games: Any, tmp_path: Path) -> None:
    """`benchmarks/alfworld_cpu.py` at the smoke size, two seeds side by side in processes of
    their own, on the plain protocol with the listed search order, two relabelled copies of
    each train game, demonstrations with mistakes, GiGPO and a KL penalty to the imitated
    model: per-seed results, the summary
    table (steps and invalid actions per episode before / after RL) and the last line's keys."""
    out = tmp_path / "cpu"
    command = [sys.executable, str(CPU_SCRIPT), "--preset", "cpu-smoke", "--out", str(out)]
    command += ["--seeds", "2", "--first-seed", "4", "--data-root", str(alfworld_games.root)]
    command += ["--protocol", "plain", "--search-order", "listed", "--relabeled-copies", "2"]
    command += ["--estimator", "gigpo", "--parallel", "2", "--demo-noise", "0.2"]
    command += ["--kl-coef", "0.05"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    pattern = (
        r"imitation_success=([\d.]+) rl_success=([\d.]+) seeds=2 improved_seeds=([012]) "
        r"minutes=[\d.]+"
    )
    match = re.fullmatch(pattern, last)
    assert match, last
    results = [json.loads((out / f"seed-{s}" / "result.json").read_text()) for s in (4, 5)]
    assert [r["setup"]["seed"] for r in results] == [4, 5]
    assert all(r["setup"]["estimator"] == "gigpo" for r in results)
    assert all(r["setup"]["demo_noise"] == 0.2 for r in results)
    assert all(r["setup"]["kl_coef"] == 0.05 for r in results)
    assert all(r["setup"]["torch_threads"] == max(1, (os.cpu_count() or 1) // 2) for r in results)
    result = results[0]
    assert (result["setup"]["protocol"], result["setup"]["search_order"]) == ("plain", "listed")
    assert result["explorer_train"]["success"] > 0  # the explorer wins through the plain protocol
    assert result["setup"]["relabeled_copies"] == 2 and result["setup"]["rl_games"] == 2
    assert result["demos"] == result["explorer_train"]["episodes"] == 4 * 3  # games and copies
    means = [sum(r[k]["success"] for r in results) / 2 for k in ("before_rl", "after_rl")]
    assert (float(match[1]), float(match[2])) == (round(means[0], 3), round(means[1], 3))
    after = result["after_rl"]
    assert after["invalid_per_episode"] == pytest.approx(
        after["invalid_per_turn"] * after["turns_per_episode"]
    )
    summary = (out / "summary.md").read_text()
    assert "| 4 |" in summary and "| 5 |" in summary and "| mean |" in summary
    assert "invalid / episode" in summary
    # RL settings swept from the same imitated models: `--imitated` reuses each seed's
    rerun = [a if a != str(out) else str(tmp_path / "rerun") for a in command]
    rerun += ["--imitated", str(out), "--optim-substeps", "2", "--rl-learning-rate", "1e-3"]
    done = subprocess.run(rerun, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for seed, before in zip((4, 5), results, strict=True):
        reran = json.loads((tmp_path / "rerun" / f"seed-{seed}" / "result.json").read_text())
        assert reran["imitation_reused"] and reran["setup"]["optim_substeps"] == 2
        assert reran["before_rl"]["success"] == before["before_rl"]["success"]
        assert reran["sft_loss"] == before["sft_loss"]


def test_the_recipe_names_its_protocols() -> None:
    """`ScratchSetup.protocol`: the recipe's `alfworld_step` calls or the plain command; a
    misspelt name is refused naming both."""
    from agentrl.recipes.alfworld_scratch import scratch_protocol
    from agentrl.tools import CommandTool
    from agentrl.tools.command import PlainCommandProtocol

    assert isinstance(scratch_protocol("tool"), CommandTool)
    assert not scratch_protocol("tool").include_admissible
    assert isinstance(scratch_protocol("plain"), PlainCommandProtocol)
    assert not scratch_protocol("plain").restate_task
    restating = scratch_protocol("plain-task")
    assert isinstance(restating, PlainCommandProtocol) and restating.restate_task
    assert not restating.include_admissible
    listing = scratch_protocol("plain-actions")
    assert isinstance(listing, PlainCommandProtocol)
    assert listing.restate_task and listing.include_admissible
    assert listing.unlisted_prefixes == ()
    local = scratch_protocol("plain-local")
    assert isinstance(local, PlainCommandProtocol) and local.include_admissible
    assert local.restate_task and local.unlisted_prefixes == ("go to ",)
    with pytest.raises(ValueError, match="'plain-actions', 'plain-local', got 'plian'"):
        scratch_protocol("plian")  # type: ignore[arg-type]


def test_the_imitation_rate_follows_its_schedule_and_rl_samples_at_its_temperature(
    tmp_path: Path,
) -> None:
    """`sft_schedule` moves the imitation rate from `sft_learning_rate` to
    `sft_final_learning_rate`; `rl_temperature` is the RL rollouts' sampling temperature."""
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import CPU, GPU, imitation_learning_rate, rl_config

    constant = replace(CPU, sft_schedule="constant", sft_steps=100, sft_learning_rate=2e-3)
    assert {imitation_learning_rate(constant, s) for s in (1, 50, 100)} == {2e-3}
    cosine = replace(constant, sft_schedule="cosine", sft_final_learning_rate=1e-4)
    rates = [imitation_learning_rate(cosine, s) for s in range(1, 101)]
    assert rates[0] == pytest.approx(2e-3) and rates[-1] == pytest.approx(1e-4)
    assert all(a >= b for a, b in itertools.pairwise(rates))
    assert rates[49] == pytest.approx((2e-3 + 1e-4) / 2, rel=0.05)
    config = rl_config(replace(CPU, rl_temperature=0.4, kl_coef=0.03, optim_substeps=3), tmp_path)
    assert config.optim_substeps == 3 and rl_config(CPU, tmp_path).optim_substeps == 4
    assert config.temperature == 0.4 and config.max_steps == CPU.updates
    assert config.kl_coef == 0.03 and rl_config(CPU, tmp_path).kl_coef == CPU.kl_coef == 0.2
    assert rl_config(GPU, tmp_path).kl_coef == 0.0  # the recipe's: no KL
    assert config.learning_rate == CPU.learning_rate and config.seed == CPU.seed
    windowed = rl_config(replace(CPU, context_window=3, context_slack=2), tmp_path)
    assert (windowed.context_window, windowed.context_slack) == (3, 2)
    assert rl_config(GPU, tmp_path).context_window is None  # the whole history
    preset = rl_config(CPU, tmp_path)  # the cpu preset's window: 2 turns, a slack of 2
    assert (preset.context_window, preset.context_slack) == (CPU.context_window, CPU.context_slack)
    assert (CPU.context_window, CPU.context_slack) == (2, 2)
    steady = rl_config(replace(CPU, rl_schedule="constant"), tmp_path)
    assert steady.lr_schedule == "constant" and steady.scheduled_learning_rate(16) == 3e-4
    assert preset.lr_schedule == "cosine"  # the preset's: 3e-4 falling to a tenth
    rl_rates = [preset.scheduled_learning_rate(u) for u in range(1, CPU.updates + 1)]
    assert rl_rates[0] == pytest.approx(3e-4) and rl_rates[-1] == pytest.approx(3e-5)
    assert all(a > b for a, b in itertools.pairwise(rl_rates))
    ending = replace(CPU, rl_schedule="linear", rl_final_learning_rate=1e-6)
    assert rl_config(ending, tmp_path).scheduled_learning_rate(CPU.updates) == pytest.approx(1e-6)


def test_imitation_batches_are_episodes_or_segments_keyed_by_the_seed() -> None:
    """`imitation_batches`: `sft_batch` whole demonstrations a step (all their segments, in
    order), or with `sft_segments` `sft_batch` segments drawn from all of them, no segment twice
    in a step; the same draws for the same seed, other draws for another."""
    from dataclasses import replace

    import numpy as np

    from agentrl.algo.datums import Datum
    from agentrl.recipes.alfworld_scratch import CPU, imitation_batches

    def datum(episode: int, segment: int) -> Datum:
        ids = np.array([episode, segment, 0], dtype=np.int64)
        zeros = np.zeros(3, dtype=np.float32)
        return Datum(ids, ids, zeros, zeros, np.ones(3, dtype=np.float32))

    demos = [[datum(e, k) for k in range(1 + e % 3)] for e in range(10)]  # 1-3 segments each
    key = [(int(d.model_input[0]), int(d.model_input[1])) for e in demos for d in e]
    whole = replace(CPU, sft_steps=5, sft_batch=4)
    for batch in imitation_batches(whole, demos):
        seen = [(int(d.model_input[0]), int(d.model_input[1])) for d in batch]
        episodes = list(dict.fromkeys(e for e, _ in seen))
        assert len(episodes) == 4  # four demonstrations, each with every segment, in order
        assert seen == [(e, k) for e in episodes for k in range(1 + e % 3)]
    segments = replace(whole, sft_segments=True)
    batches = list(imitation_batches(segments, demos))
    assert len(batches) == 5
    for batch in batches:
        seen = [(int(d.model_input[0]), int(d.model_input[1])) for d in batch]
        assert len(seen) == len(set(seen)) == 4 and set(seen) <= set(key)
    assert any(  # segments of one episode are drawn apart, not as a whole
        len({e for e, _ in [(int(d.model_input[0]), 0) for d in b]}) == 4 for b in batches
    )

    def draws(setup: Any) -> list[list[tuple[int, int]]]:
        return [
            [(int(d.model_input[0]), int(d.model_input[1])) for d in b]
            for b in imitation_batches(setup, demos)
        ]

    assert draws(segments) == draws(segments)
    assert draws(segments) != draws(replace(segments, seed=1))


def test_a_bad_noise_or_kl_is_refused_before_anything_runs() -> None:
    """`ScratchSetup` refuses a `demo_noise` outside [0, 1) or a negative `kl_coef` when it is
    built, naming the field (not after the games and minutes of imitation); the benchmarks'
    flags give the same message."""
    import argparse
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import CPU, add_format_arguments, format_overrides

    noise = re.escape("ScratchSetup.demo_noise must be in [0, 1), got 1.0")
    with pytest.raises(ValueError, match=noise):
        replace(CPU, demo_noise=1.0)
    with pytest.raises(ValueError, match=re.escape("ScratchSetup.kl_coef must be >= 0, got -0.1")):
        replace(CPU, kl_coef=-0.1)
    ending = re.escape("ScratchSetup.rl_final_learning_rate (1e-05) must be > 0 and is the end")
    with pytest.raises(ValueError, match=ending):  # RL would refuse it after the imitation
        replace(CPU, rl_schedule="constant", rl_final_learning_rate=1e-5)
    with pytest.raises(ValueError, match=re.escape("rl_final_learning_rate (0.0) must be > 0")):
        replace(CPU, rl_final_learning_rate=0.0)
    parser = argparse.ArgumentParser()
    add_format_arguments(parser)
    for flags, message in (
        (["--demo-noise", "-0.5"], "ScratchSetup.demo_noise must be in [0, 1), got -0.5"),
        (["--kl-coef", "-1"], "ScratchSetup.kl_coef must be >= 0, got -1.0"),
        (["--optim-substeps", "0"], "ScratchSetup.optim_substeps must be >= 1, got 0"),
        (["--rl-learning-rate", "0"], "--rl-learning-rate must be > 0, got 0.0"),
        (["--sft-learning-rate", "-0.001"], "--sft-learning-rate must be > 0, got -0.001"),
        (["--context-window", "-1"], "--context-window must be >= 0 (0: the whole history)"),
        (["--rl-temperature", "0"], "--rl-temperature must be > 0, got 0.0"),
        (["--eval-every", "-1"], "ScratchSetup.eval_every must be >= 0, got -1"),
        (
            ["--sft-context-weight", "-0.1"],
            "ScratchSetup.sft_context_weight must be >= 0, got -0.1",
        ),
        (
            ["--context-window", "0", "--context-slack", "2"],  # the whole history, a slack
            "ScratchSetup.context_slack (2) must be >= 0 and needs a",
        ),
    ):
        with pytest.raises(SystemExit, match=re.escape(message)):
            format_overrides(CPU, parser.parse_args(flags))
    assert format_overrides(CPU, parser.parse_args(["--kl-coef", "0.05"])).kl_coef == 0.05
    flags = ["--optim-substeps", "4", "--rl-learning-rate", "1e-4"]
    rl = format_overrides(CPU, parser.parse_args(flags))
    assert (rl.optim_substeps, rl.learning_rate) == (4, 1e-4)
    flags = ["--context-window", "3", "--context-slack", "2", "--rl-temperature", "1"]
    windowed = format_overrides(CPU, parser.parse_args(flags))
    assert (windowed.context_window, windowed.context_slack) == (3, 2)
    assert windowed.rl_temperature == 1.0 and CPU.rl_temperature == 0.5
    flags = ["--sft-learning-rate", "5e-3", "--sft-schedule", "cosine"]
    decayed = format_overrides(CPU, parser.parse_args(flags))
    assert (decayed.sft_learning_rate, decayed.sft_schedule) == (5e-3, "cosine")
    rl_decayed = format_overrides(CPU, parser.parse_args(["--rl-schedule", "linear"]))
    assert (rl_decayed.rl_schedule, CPU.rl_schedule) == ("linear", "cosine")
    assert CPU.sft_schedule == "constant" and decayed.sft_steps == CPU.sft_steps
    flags = ["--sft-segments", "--eval-every", "8"]
    curved = format_overrides(CPU, parser.parse_args(flags))
    assert (curved.sft_segments, curved.eval_every) == (True, 8)
    assert (CPU.sft_segments, CPU.eval_every) == (False, 0)  # the preset's, unless given
    weighted = format_overrides(CPU, parser.parse_args(["--sft-context-weight", "0"]))
    assert weighted.sft_context_weight == 0.0 and CPU.sft_context_weight == 0.1
    assert format_overrides(CPU, parser.parse_args([])) == CPU
    with pytest.raises(SystemExit):  # argparse names the choices
        parser.parse_args(["--sft-schedule", "exponential"])
    assert (
        format_overrides(
            windowed, parser.parse_args(["--context-window", "0", "--context-slack", "0"])
        ).context_window
        is None
    )
    with pytest.raises(ValueError, match="context_window must be >= 1 or None"):
        replace(CPU, context_window=0)


def test_imitation_with_context_targets_divides_by_the_reply_tokens() -> None:
    """`sft_context_weight`: one real torch step's loss is the replies' summed cross-entropy
    plus the weighted context's, divided by the reply tokens alone (`imitation_loss`), so
    the auxiliary loss adds to the replies' gradient instead of diluting it; without the
    weight the step is the default per-token mean."""
    import asyncio
    from dataclasses import replace

    import numpy as np

    from agentrl.algo.datums import Datum
    from agentrl.backends.base import LossConfig, LossName
    from agentrl.backends.local import LocalBackend
    from agentrl.recipes.alfworld_scratch import CPU, imitation_loss
    from agentrl.recipes.tokenizer import bpe_tokenizer

    backend = LocalBackend.tiny(bpe_tokenizer([], 0), seed=0, device="cpu", full_finetune=True)
    tokens = np.arange(3, 15, dtype=np.int64)
    replies = np.array([0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1], dtype=np.float32)
    context = np.where(replies == 1, 0.0, 0.25).astype(np.float32)
    zeros = np.zeros(12, dtype=np.float32)

    def datum(mask: np.ndarray) -> Datum:
        return Datum(tokens[:-1], tokens[1:], zeros[:-1], zeros[:-1], mask[:-1].copy())

    weighted = replace(CPU, sft_context_weight=0.25)
    both, reply_only, context_only = datum(replies + context), datum(replies), datum(context)
    config = imitation_loss(weighted, [both])
    assert config.normalisation == "constant" and config.norm_constant == 4.0  # reply tokens
    unweighted = replace(CPU, sft_context_weight=0.0)  # the preset's weight is 0.1
    assert imitation_loss(unweighted, [reply_only]) == LossConfig()  # the default mean

    async def loss(datum: Datum, cfg: LossConfig) -> float:
        result = await backend.forward_backward([datum], LossName.CROSS_ENTROPY, cfg)
        return result.loss

    total = asyncio.run(loss(both, config))
    reply_mean = asyncio.run(loss(reply_only, imitation_loss(unweighted, [reply_only])))
    summed = LossConfig(normalisation="constant", norm_constant=1.0)
    context_sum = asyncio.run(loss(context_only, summed))
    assert total == pytest.approx(reply_mean + context_sum / 4, rel=1e-5)


def test_the_rl_phase_uses_the_setups_estimator(tmp_path: Path) -> None:
    """`ScratchSetup.estimator` reaches the Trainer's config and builds that estimator: the
    CPU preset's GiGPO (with the recipe's reward's per-turn form), the GPU preset's GroupMean."""
    from agentrl.algo.advantages import GiGPO, GroupMean
    from agentrl.algo.rewards import WinMinusInvalid
    from agentrl.config.plugins import make_estimator
    from agentrl.recipes.alfworld_scratch import CPU, GPU, rl_config

    cpu, gpu = rl_config(CPU, tmp_path), rl_config(GPU, tmp_path)
    assert (cpu.estimator, gpu.estimator) == ("gigpo", "group_mean")
    built = make_estimator(cpu.estimator, reward_fn=WinMinusInvalid())
    assert isinstance(built, GiGPO) and isinstance(built.reward_fn, WinMinusInvalid)
    assert isinstance(make_estimator(gpu.estimator), GroupMean)


def test_rl_games_are_kept_out_of_the_demonstrations(alfworld_games: Any, tmp_path: Path) -> None:
    """`scratch_tasks`: `rl_games` of the train games, a draw keyed by the seed, go to RL and
    none of them to the demonstrations; a folder with too few games is refused naming it."""
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import CPU_SMOKE, scratch_tasks

    root = alfworld_games.root
    games = scratch_tasks(CPU_SMOKE, tmp_path, root)
    train_ids = {t.task_id for t in games.train}
    rl_ids = {t.task_id for t in games.rl}
    assert len(train_ids) == 4 and len(rl_ids) == 2 and not train_ids & rl_ids
    assert len(games.held_out) == 2 and all("valid_unseen" in t.task_id for t in games.held_out)
    assert scratch_tasks(CPU_SMOKE, tmp_path, root) == games  # keyed, not drawn anew
    draws = {
        frozenset(t.task_id for t in scratch_tasks(replace(CPU_SMOKE, seed=s), tmp_path, root).rl)
        for s in range(6)
    }
    assert len(draws) > 1  # the seed picks them
    none_kept = scratch_tasks(replace(CPU_SMOKE, train_games=6, rl_games=0), tmp_path, root)
    assert len(none_kept.train) == 6 and none_kept.rl == []
    with pytest.raises(ValueError, match=r"holds 6 train .* needs 8 train"):
        scratch_tasks(replace(CPU_SMOKE, train_games=6), tmp_path, root)
    with pytest.raises(ValueError, match="rl_games must be >= 0, got -1"):
        scratch_tasks(replace(CPU_SMOKE, rl_games=-1), tmp_path, root)


async def test_sampled_evaluation_is_keyed_not_ordered(alfworld_games: Any, tmp_path: Path) -> None:
    """The recipe's evaluation at temperature 1 draws keyed by (seed, game, branch, turn): the
    same games played twice give the same episodes, token for token (arrival order from the
    env workers does not matter), and another seed gives other ones."""
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import CPU_SMOKE, _backend, _Run, scratch_tasks
    from agentrl.recipes.tokenizer import bpe_tokenizer

    setup = replace(CPU_SMOKE, eval_temperature=1.0, max_steps=6)
    games = scratch_tasks(setup, tmp_path, alfworld_games.root)
    tokenizer = bpe_tokenizer([], 0)
    backend = _backend(setup, tokenizer, tmp_path / "run")

    async def tokens(run: _Run) -> list[list[int]]:
        groups, _ = await run.play(await backend.sampler(), tokenizer, games.held_out, 2)
        return [
            [tok for turn in t.turns for tok in turn.completion_tokens]
            for g in groups
            for t in g.trajectories
        ]

    run = _Run(setup)
    other = _Run(replace(setup, seed=1))
    try:
        first, second = await tokens(run), await tokens(run)
        assert first == second and len(first) == 4 and all(first)
        assert await tokens(other) != first
    finally:
        await run.factory.close()
        await other.factory.close()


async def test_demonstration_noise_is_played_and_left_out_of_the_targets(
    alfworld_games: Any, tmp_path: Path
) -> None:
    """`demo_noise`: the explorer plays its keyed mistakes through the rollout engine and still
    wins; `demonstration_datums` keeps every turn in the sequence and makes exactly the
    non-mistake replies targets."""
    from dataclasses import replace

    from agentrl.envs.alfworld.explorer import observations_in
    from agentrl.recipes.alfworld_scratch import (
        CPU_SMOKE,
        _Run,
        demo_noise,
        demonstration_datums,
        scratch_tasks,
    )
    from agentrl.recipes.tokenizer import bpe_tokenizer

    setup = replace(CPU_SMOKE, protocol="plain-task", search_order="listed", max_steps=40)
    assert demo_noise(setup) is None
    setup = replace(setup, demo_noise=0.3)
    noise = demo_noise(setup)
    assert noise is not None and (noise.rate, noise.seed) == (0.3, setup.seed)
    games = scratch_tasks(setup, tmp_path, alfworld_games.root)
    tokenizer = bpe_tokenizer([], 0)
    run = _Run(setup)
    try:
        groups, score = await run.explore(tokenizer, games.train, (512, 131_072), noise)
        _, clean = await run.explore(tokenizer, games.train, (512, 131_072))
    finally:
        await run.factory.close()
    assert score.success >= 0.75 and score.turns_per_episode > clean.turns_per_episode
    datums = demonstration_datums(groups, tokenizer, noise)
    trajectories = [t for g in groups for t in g.trajectories]
    assert len(datums) == len(trajectories)
    mistakes = 0
    for trajectory, (datum,) in zip(trajectories, datums, strict=True):  # one segment each
        first = observations_in(tokenizer.decode(list(trajectory.turns[0].prompt_tokens)))[0]
        for turn_index, turn in enumerate(trajectory.turns):
            start = len(turn.prompt_tokens)
            targets = datum.mask[start - 1 : start - 1 + len(turn.completion_tokens)]
            noisy = noise.noisy(first, turn_index)
            mistakes += noisy
            assert set(targets.tolist()) == ({0.0} if noisy else {1.0})
    assert mistakes > 0
    every = demonstration_datums(groups, tokenizer, None)  # without noise: every reply
    replies = [sum(len(turn.completion_tokens) for turn in t.turns) for t in trajectories]
    assert [int(d.mask.sum()) for (d,) in every] == replies


async def test_windowed_demonstrations_are_the_explorer_episodes_under_the_window(
    alfworld_games: Any, tmp_path: Path
) -> None:
    """`context_window`: the explorer (which reads the whole history) plays, then its episodes
    are played again under the window reply for reply: the same commands and wins, prompts
    cut to the first messages and the last turns, one datum per segment training each reply
    exactly once; mistakes stay untrained."""
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import (
        CPU_SMOKE,
        _Run,
        demo_noise,
        demonstration_datums,
        scratch_tasks,
    )
    from agentrl.recipes.tokenizer import bpe_tokenizer

    whole = replace(CPU_SMOKE, protocol="plain-task", search_order="listed", max_steps=40)
    whole = replace(whole, demo_noise=0.3)
    windowed = replace(whole, context_window=2, context_slack=1)
    games = scratch_tasks(whole, tmp_path, alfworld_games.root)
    tokenizer = bpe_tokenizer([], 0)
    played = {}
    for setup in (whole, windowed):
        run = _Run(setup)
        try:
            played[setup.context_window] = await run.explore(
                tokenizer, games.train, (512, 131_072), demo_noise(setup)
            )
        finally:
            await run.factory.close()
    (full, score), (cut, cut_score) = played[None], played[2]
    assert replace(cut_score, seconds=0.0) == replace(score, seconds=0.0)  # the explorer's own
    assert score.success >= 0.75
    full_t = [t for g in full for t in g.trajectories]
    cut_t = [t for g in cut for t in g.trajectories]
    assert [[u.assistant_text for u in t.turns] for t in cut_t] == [
        [u.assistant_text for u in t.turns] for t in full_t
    ]
    assert max(len(t.turns) for t in cut_t) > 3  # long enough to be cut
    for t in cut_t:  # cut when a prompt would hold more than 3 turns, back to the last 2
        n = len(t.turns)
        assert [u.dropped_turns for u in t.turns] == [2 * max(0, (k - 2) // 2) for k in range(n)]
        assert [u.new_segment for u in t.turns] == [k >= 4 and k % 2 == 0 for k in range(n)]
    noise = demo_noise(windowed)
    full_datums = demonstration_datums(full, tokenizer, noise)
    cut_datums = demonstration_datums(cut, tokenizer, noise)
    segments = [1 + sum(u.new_segment for u in t.turns) for t in cut_t]
    assert [len(episode) for episode in cut_datums] == segments and max(segments) > 1
    assert [sum(int(d.mask.sum()) for d in e) for e in cut_datums] == [
        sum(int(d.mask.sum()) for d in e) for e in full_datums
    ]  # every non-mistake reply trained exactly once, under the window as without it
    longest = max(len(d.target_tokens) for e in cut_datums for d in e)
    assert longest < max(len(d.target_tokens) for e in full_datums for d in e)
    # a trajectory budget the windowed prompts fit and the whole history does not: only the
    # window's budget applies (the whole-history pass just records the explorer's replies)
    budget = (512, longest + 1 + 512)
    assert budget[1] < max(len(d.target_tokens) for e in full_datums for d in e)
    run = _Run(windowed)
    try:
        tight, _ = await run.explore(tokenizer, games.train, budget, noise)
    finally:
        await run.factory.close()
    assert [[u.assistant_text for u in t.turns] for g in tight for t in g.trajectories] == [
        [u.assistant_text for u in t.turns] for t in cut_t
    ]


async def test_the_imitated_model_is_saved_and_reused_only_for_the_same_setup(
    alfworld_games: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run_scratch` saves the imitated model; a rerun given `imitated` loads it instead of
    imitating (the same weights: its sampled evaluation before RL is the first run's, episode
    for episode) while its RL settings differ, keeps the earlier RL metrics aside, and a run
    whose imitation setting differs imitates again, naming the field."""
    from dataclasses import replace

    from agentrl.recipes.alfworld_scratch import (
        CPU_SMOKE,
        imitation_dir,
        run_scratch,
        saved_imitation,
    )

    setup = replace(CPU_SMOKE, eval_temperature=1.0, max_steps=6)
    out = tmp_path / "run"
    first = await run_scratch(setup, out, alfworld_games.root)
    assert not first.imitation_reused and (imitation_dir(out) / "imitation.json").exists()
    rl_only = replace(
        setup, learning_rate=3e-3, optim_substeps=2, kl_coef=0.1, rl_schedule="cosine"
    )
    again = await run_scratch(rl_only, out, alfworld_games.root, imitated=out)
    assert again.imitation_reused and "reusing the model saved in" in capsys.readouterr().out
    # no demonstrations played (a phase whose time is not taken), whatever the machine's load
    assert "demonstrations" in first.seconds and "demonstrations" not in again.seconds
    assert replace(again.before_rl, seconds=0) == replace(first.before_rl, seconds=0)
    assert (again.sft_loss, again.demos, again.explorer_train) == (
        first.sft_loss,
        first.demos,
        first.explorer_train,
    )
    kept = [line for line in (out / "run" / "metrics.1.jsonl").read_text().splitlines() if line]
    assert len(kept) == 1 and len((out / "run" / "metrics.jsonl").read_text().splitlines()) == 1
    # a model saved before a field existed: the field's default is what it was imitated with
    record_path = imitation_dir(out) / "imitation.json"
    record = json.loads(record_path.read_text())
    del record["key"]["context_window"], record["key"]["context_slack"]
    record_path.write_text(json.dumps(record))
    older = await run_scratch(replace(setup, updates=0), tmp_path / "d", alfworld_games.root, out)
    assert older.imitation_reused
    # the decision alone (`saved_imitation`, which run_scratch asks): no backend is touched
    key = json.loads(record_path.read_text())["key"]
    windowed = {**key, "context_window": 2, "sft_steps": 2}
    assert await saved_imitation(windowed, out, backend=None) is None
    assert "imitated with other context_window, sft_steps" in capsys.readouterr().out
    # and a refused run imitates again, end to end
    other = await run_scratch(
        replace(setup, sft_steps=3, updates=0), tmp_path / "b", alfworld_games.root, imitated=out
    )
    assert not other.imitation_reused and len(other.sft_loss) == 3
    assert "imitated with other sft_steps; imitating again" in capsys.readouterr().out
    assert await saved_imitation(key, tmp_path / "nowhere", backend=None) is None
    assert "no saved model in" in capsys.readouterr().out


def test_the_rows_benchmark_measures_what_imitation_reads(
    alfworld_games: Any, tmp_path: Path
) -> None:
    """`benchmarks/alfworld_rows.py` (`demonstrations` per window): every window trains the
    same reply tokens once, a window of one turn reads rows shorter than the whole history's
    (a smaller squared sum), and the last line holds each window's keys; a bad window is
    refused naming the form."""
    command = [sys.executable, str(BENCHMARKS / "alfworld_rows.py"), "--preset", "cpu-smoke"]
    command += ["--data-root", str(alfworld_games.root), "--games", "4"]
    command += ["--protocol", "plain-task", "--search-order", "listed", "--demo-noise", "0"]
    done = subprocess.run(
        [*command, "--windows", "0/0", "1/1"], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    rows = [
        line.split("|")[1:-1]
        for line in lines
        if line.startswith("| 0/0") or line.startswith("| 1/1")
    ]
    assert [row[0].strip() for row in rows] == ["0/0", "1/1"]
    whole, windowed = ([float(cell.strip().rstrip("K")) for cell in row[1:]] for row in rows)
    assert whole[0] == 1.0 and windowed[0] > 1.0  # one row an episode; segments under the window
    assert whole[4] == windowed[4] > 0  # the same trained tokens
    assert windowed[2] < whole[2]  # shorter rows
    pattern = r"games=4 trained_per_episode=\S+ tokens_0_0=\d+ attention_0_0=1\.000 "
    pattern += r"tokens_1_1=\d+ attention_1_1=(0\.\d+)"
    match = re.fullmatch(pattern, lines[-1])
    assert match, lines[-1]
    bad = subprocess.run(
        [*command, "--windows", "2-2"], capture_output=True, text=True, timeout=900
    )
    assert bad.returncode == 2 and "a window is WINDOW/SLACK" in bad.stderr
    slack_alone = subprocess.run(
        [*command, "--windows", "2/2", "0/1"], capture_output=True, text=True, timeout=900
    )
    assert slack_alone.returncode == 2 and "--windows: ScratchSetup.context_slack (1)" in (
        slack_alone.stderr
    )
    assert "| 2/2 |" not in slack_alone.stdout  # refused before any window is played


def test_the_cpu_benchmark_shares_out_torch_threads_or_takes_them_given(tmp_path: Path) -> None:
    """`benchmarks/alfworld_cpu.py`: each seed gets `--torch-threads` when given (one when a
    second run shares the cores), else the preset's one seed at a time and the cores shared
    out side by side; a count below one is refused before any game is generated."""
    sys.path.insert(0, str(CPU_SCRIPT.parent))
    try:
        import alfworld_cpu
    finally:
        sys.path.remove(str(CPU_SCRIPT.parent))
    cores = os.cpu_count() or 1
    assert alfworld_cpu.seed_threads(2, 1, 3, None) == 2  # one at a time: the preset's
    assert alfworld_cpu.seed_threads(2, 1, 3, 1) == 1
    assert alfworld_cpu.seed_threads(2, 3, 3, None) == max(1, cores // 3)
    assert alfworld_cpu.seed_threads(2, 3, 2, None) == max(1, cores // 2)  # two seeds only
    assert alfworld_cpu.seed_threads(1, 2, 2, 4) == 4
    done = subprocess.run(
        [sys.executable, str(CPU_SCRIPT), "--out", str(tmp_path / "out"), "--torch-threads", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "--torch-threads must be >= 1, got 0" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="die_with_parent: Linux only")
def test_the_cpu_benchmarks_seeds_die_with_it(tmp_path: Path) -> None:
    """A benchmark killed while its seeds run side by side (`kill`, `timeout`) takes them
    with it: `seed_pool`'s processes die with their parent instead of training on."""
    import signal

    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys, time\n"
        "if __name__ == '__main__':  # the spawned seed imports no more than it runs\n"
        f"    sys.path.insert(0, {str(CPU_SCRIPT.parent)!r})\n"
        "    from alfworld_cpu import seed_pool\n"
        "    pool = seed_pool(1)\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    pool.submit(time.sleep, 300)\n"
        "    time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        seed = int(parent.stdout.readline())
        assert alive(seed)  # alive while its parent is
        parent.send_signal(signal.SIGTERM)
        parent.wait(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and alive(seed):
            time.sleep(0.1)  # killed by the kernel when its parent ended
        assert not alive(seed)
    finally:
        parent.kill()
