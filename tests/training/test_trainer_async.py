"""Asynchronous rollouts through the real trainer and the tiny local backend (its own sampler:
real sampled tokens; rewards are a hash of the reply, so every update trains):
`--max-staleness 0` gives the synchronous run's datums and weights exactly; at staleness 1
every trained turn carries the version that sampled it, never older than the bound; the
local sampler's versions are exact across an optimizer step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import torch

from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    LossConfig,
    LossName,
    SamplingParams,
)
from agentrl.backends.versions import VersionedSampler
from agentrl.config.train import DEFAULT_DUAL_CLIP
from agentrl.testing import RecordingBackend, same_datums
from agentrl.testing.signal import HashReward
from agentrl.training import recipe
from agentrl.training.trainer import Trainer
from tests.helpers.trainer_helpers import PROTOCOL, tiny_backend, toy_config


def _config(run_dir: Path, **overrides: Any) -> Any:
    values: dict[str, Any] = dict(
        max_steps=3,
        save_every=3,
        games_per_batch=2,
        group_size=3,
        max_episode_steps=2,
        max_assistant_tokens=12,
        max_trajectory_tokens=1500,
        learning_rate=5e-3,
    )
    values.update(overrides)
    return toy_config(run_dir, **values)


async def _run(config: Any, tokenizer: Any) -> tuple[RecordingBackend, Any, Any]:
    inner = tiny_backend(config, tokenizer)
    backend = RecordingBackend(inner)
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=recipe.env_factory_for(config),
        tasks=recipe.tasks_for(config, ["train"]),
        renderer=recipe.renderer_for(tokenizer, PROTOCOL),
        protocol=PROTOCOL,
        reward_fn=HashReward(),
        progress=False,
    )
    result = await trainer.run()
    return backend, inner, result


async def test_staleness_zero_is_the_synchronous_run_exactly(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    sync, sync_inner, sync_result = await _run(_config(tmp_path / "sync"), qwen_tokenizer)
    config = _config(tmp_path / "async", async_rollouts=True, max_staleness=0)
    assert config.loss_config() == _config(tmp_path / "x").loss_config()  # same loss
    run, run_inner, result = await _run(config, qwen_tokenizer)
    assert len(sync.datums) == len(run.datums) == 3  # every update trained
    for a, b in zip(sync.datums, run.datums, strict=True):
        assert same_datums(a, b)
    for p, q in zip(
        sync_inner.trainable_parameters(), run_inner.trainable_parameters(), strict=True
    ):
        assert torch.equal(p, q)
    assert [m.loss for m in sync_result.metrics] == [m.loss for m in result.metrics]
    assert {m.sampling["offpolicy/staleness"] for m in result.metrics} == {0.0}


async def test_staleness_one_trains_no_token_older_than_the_bound(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    config = _config(tmp_path / "run", async_rollouts=True, max_staleness=1, max_steps=4)
    loss = config.loss_config()
    assert loss.tis_cap is None and loss.dual_clip == DEFAULT_DUAL_CLIP  # coupled PPO
    _, _, result = await _run(config, qwen_tokenizer)
    assert result.last_update == 4
    records = [json.loads(line) for line in (config.run_dir / "rollouts.jsonl").open()]
    assert len(records) == 4 * config.games_per_batch * config.group_size
    for record in records:
        trained_at = record["extra"]["update"] - 1  # the weights the update trained
        for turn in record["turns"]:
            version = turn["policy_version"]
            assert version is not None, "every trained turn carries its sampling version"
            assert 0 <= trained_at - version <= 1
    for metrics in result.metrics:
        assert metrics.sampling["offpolicy/staleness"] <= 1.0
        assert 0.0 <= metrics.sampling["async/token_staleness_mean"] <= 1.0


async def test_the_local_samplers_versions_are_exact_across_an_optimizer_step(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    from agentrl.backends.local import LocalBackend

    backend = LocalBackend.tiny(qwen_tokenizer, seed=0, device="cpu", checkpoint_dir=tmp_path)
    sampler = VersionedSampler(await backend.sampler(), 5)
    params = SamplingParams(max_tokens=3, seed=1)
    prompt = qwen_tokenizer.encode("hello there")
    (before,) = await sampler.sample(prompt, 1, params)
    assert before.policy_version == 5
    tokens = np.array([*prompt, *before.tokens])
    mask = np.array([0.0] * (len(prompt) - 1) + [1.0] * len(before.tokens), dtype=np.float32)
    logprobs = np.array([0.0] * (len(prompt) - 1) + list(before.logprobs), dtype=np.float32)
    datum = Datum(tokens[:-1], tokens[1:], logprobs, mask, mask)
    await backend.forward_backward([datum], LossName.PPO, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=1e-3))
    # Nobody installed the new weights yet: the live sampler still serves them, version 6.
    (after,) = await sampler.sample(prompt, 1, params)
    assert after.policy_version == 6
    sampler.install(await backend.sampler(), 6)
    (installed,) = await sampler.sample(prompt, 1, params)
    assert installed.policy_version == 6


def test_async_refuses_settings_it_replaces_and_defaults_the_loss(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max-steps-off-policy"):
        _config(tmp_path, async_rollouts=True, max_steps_off_policy=1)
    with pytest.raises(ValueError, match="stream-groups"):
        _config(tmp_path, async_rollouts=True, stream_groups=True)
    with pytest.raises(ValueError, match="dynamic-sampling-budget"):
        _config(tmp_path, async_rollouts=True, dynamic_sampling_budget=2)
    on_policy = _config(tmp_path, async_rollouts=True, max_staleness=0).loss_config()
    assert on_policy.tis_cap is None and on_policy.dual_clip is None
    chosen = _config(tmp_path, async_rollouts=True, tis_cap=5.0, dual_clip=0).loss_config()
    assert chosen.tis_cap == 5.0 and chosen.dual_clip is None


async def test_a_resumed_async_run_admits_its_next_update_afresh(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    first = _config(tmp_path / "run", async_rollouts=True, max_steps=2, save_every=2)
    _, _, done = await _run(first, qwen_tokenizer)
    assert done.last_update == 2
    resumed = _config(tmp_path / "run", async_rollouts=True, max_steps=4, save_every=2, resume=True)
    _, _, result = await _run(resumed, qwen_tokenizer)
    assert [m.update for m in result.metrics] == [3, 4]
    records = [json.loads(line) for line in (resumed.run_dir / "rollouts.jsonl").open()]
    later = [r for r in records if r["extra"]["update"] >= 3]
    assert len(later) == 2 * resumed.games_per_batch * resumed.group_size
    # nothing from before the restart is trained after it: the groups in flight died with
    # the first process, update 3 was played by the resumed weights (version 2) or newer
    assert all(t["policy_version"] >= 2 for r in later for t in r["turns"])
