"""Several optimizer steps per update (`TrainConfig.optim_substeps`): the batch's datums in
consecutive parts of whole trajectories, one forward_backward and one optim_step each; the
real tiny model trained through the Trainer equals the same parts trained by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentrl.algo.datums import Datum
from agentrl.backends.base import AdamParams, ForwardBackwardResult
from agentrl.training.substeps import merge_results, substep_parts


def _datum(sequence: str | None, length: int = 3) -> Datum:
    zeros = np.zeros(length, dtype=np.float32)
    ids = np.arange(length, dtype=np.int64)
    return Datum(ids, ids, zeros, zeros, np.ones(length, dtype=np.float32), sequence=sequence)


def test_parts_keep_the_segments_of_a_trajectory_together_and_in_order() -> None:
    datums = [_datum("g/0"), _datum("g/0"), _datum("g/1"), _datum(None), _datum("g/2")]
    parts = substep_parts(datums, 2)
    assert [len(p) for p in parts] == [3, 2]  # 4 trajectories: (g/0 x2, g/1) and (None, g/2)
    assert [d for p in parts for d in p] == datums
    assert substep_parts(datums, 1) == [datums]
    assert [len(p) for p in substep_parts(datums, 10)] == [2, 1, 1, 1]  # one per trajectory
    assert substep_parts([], 3) == []
    with pytest.raises(ValueError, match="optim_substeps must be >= 1"):
        substep_parts(datums, 0)


def test_merged_report_weights_by_tokens_and_adds_counts() -> None:
    merged = merge_results(
        [
            ForwardBackwardResult(1.0, 10, {"loss_sum": 10.0, "ratio_mean": 1.0, "datums": 2.0}),
            ForwardBackwardResult(4.0, 30, {"loss_sum": 120.0, "ratio_mean": 2.0, "datums": 3.0}),
        ]
    )
    assert merged.loss == pytest.approx((1.0 * 10 + 4.0 * 30) / 40)
    assert merged.num_tokens == 40
    assert merged.metrics["loss_sum"] == 130.0
    assert merged.metrics["datums"] == 5.0
    assert merged.metrics["ratio_mean"] == pytest.approx((10 + 60) / 40)
    assert merged.metrics["substeps"] == 2.0


async def test_an_update_of_two_substeps_equals_two_steps_by_hand(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    import torch

    from agentrl.training.distillation import Distillation
    from tests.helpers.trainer_helpers import (
        RecordingBackend,
        tiny_backend,
        toy_config,
        toy_env_trainer,
    )

    config = toy_config(
        tmp_path / "run",
        max_steps=1,
        loss="importance_sampling",
        group_size=2,
        max_episode_steps=2,
        max_assistant_tokens=24,
        optim_substeps=2,
    )
    teacher = await tiny_backend(toy_config(tmp_path / "t", seed=7), qwen_tokenizer).sampler()
    student = RecordingBackend(tiny_backend(config, qwen_tokenizer))
    # distillation keeps every trajectory (no degenerate group), so both parts have datums
    trainer = toy_env_trainer(
        config, qwen_tokenizer, student, distillation=Distillation(teacher, kl_coef=1.0)
    )
    try:
        metrics = await trainer.update(1)
    finally:
        await trainer.close()
    first, second = student.batches
    assert len(first) + len(second) == config.games_per_batch * config.group_size
    assert metrics.backend["fb/substeps"] == 2.0
    assert metrics.trained_tokens == sum(int(d.mask.sum()) for d in first + second)

    by_hand = tiny_backend(toy_config(tmp_path / "hand"), qwen_tokenizer)
    adam = AdamParams(learning_rate=config.learning_rate)
    for part in (first, second):
        await by_hand.forward_backward(part, config.loss, config.loss_config())
        await by_hand.optim_step(adam)
    one_step = tiny_backend(toy_config(tmp_path / "one"), qwen_tokenizer)
    await one_step.forward_backward(first + second, config.loss, config.loss_config())
    await one_step.optim_step(adam)
    trained = student.inner.trainable_parameters()
    for mine, theirs in zip(trained, by_hand.trainable_parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    assert any(
        not torch.equal(a, b) for a, b in zip(trained, one_step.trainable_parameters(), strict=True)
    )


def test_substeps_and_streaming_are_refused_together(tmp_path: Path) -> None:
    from tests.helpers.trainer_helpers import toy_config

    with pytest.raises(ValueError, match="--optim-substeps 2"):
        toy_config(tmp_path, stream_groups=True, optim_substeps=2)
