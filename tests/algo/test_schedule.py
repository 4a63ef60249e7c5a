"""Learning-rate schedules (`agentrl.algo.schedule`) by hand, and the Trainer applying them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from agentrl.algo.schedule import LRSchedule, scheduled_learning_rate


def test_schedules_by_hand() -> None:
    rates = [scheduled_learning_rate("linear", 5.0, 1.0, n, 5) for n in range(1, 7)]
    assert rates == [5.0, 4.0, 3.0, 2.0, 1.0, 1.0]  # past the last update: the final rate
    cosine = [scheduled_learning_rate(LRSchedule.COSINE, 5.0, 1.0, n, 3) for n in (1, 2, 3)]
    assert cosine == pytest.approx([5.0, 3.0, 1.0])
    quarter = scheduled_learning_rate("cosine", 5.0, 1.0, 2, 5)
    assert quarter == pytest.approx(1.0 + 4.0 * (1 + math.cos(math.pi / 4)) / 2)
    assert scheduled_learning_rate("constant", 5.0, 1.0, 4, 5) == 5.0
    assert scheduled_learning_rate("linear", 5.0, 1.0, 1, 1) == 5.0  # one update: the base
    with pytest.raises(ValueError, match="update and total must be >= 1"):
        scheduled_learning_rate("linear", 5.0, 1.0, 0, 5)
    with pytest.raises(ValueError):
        scheduled_learning_rate("step", 5.0, 1.0, 1, 5)


def test_warmup_scales_the_first_updates_by_hand() -> None:
    warm = [scheduled_learning_rate("constant", 4.0, 1.0, n, 10, warmup=4) for n in range(1, 7)]
    assert warm == [1.0, 2.0, 3.0, 4.0, 4.0, 4.0]
    linear = [scheduled_learning_rate("linear", 5.0, 1.0, n, 5, warmup=2) for n in (1, 2, 3)]
    assert linear == [2.5, 4.0, 3.0]  # the schedule's rate, halved at update 1
    assert scheduled_learning_rate("cosine", 5.0, 1.0, 1, 3, warmup=0) == 5.0
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        scheduled_learning_rate("constant", 5.0, 1.0, 1, 5, warmup=-1)


def test_config_defaults_and_refusals(tmp_path: Path) -> None:
    from tests.helpers.trainer_helpers import toy_config

    plain = toy_config(tmp_path, learning_rate=1e-3, max_steps=3)
    assert [plain.adam_params(n).learning_rate for n in (1, 3)] == [1e-3, 1e-3]
    linear = toy_config(tmp_path, learning_rate=1e-3, max_steps=3, lr_schedule="linear")
    assert linear.adam_params(3).learning_rate == pytest.approx(1e-4)  # default: a tenth
    with pytest.raises(ValueError, match="--lr-schedule linear"):
        toy_config(tmp_path, final_learning_rate=1e-4)
    warm = toy_config(tmp_path, learning_rate=1e-3, max_steps=3, warmup_updates=2)
    assert [warm.adam_params(n).learning_rate for n in (1, 2, 3)] == [5e-4, 1e-3, 1e-3]


class _RecordingAdam:
    """A real backend whose optimizer steps' parameters are kept for the test."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rates: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def optim_step(self, adam: Any) -> Any:
        self.rates.append(adam.learning_rate)
        return await self.inner.optim_step(adam)


async def test_the_trainer_steps_each_update_at_its_scheduled_rate(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from tests.helpers.trainer_helpers import tiny_backend, toy_config, toy_env_trainer

    config = toy_config(
        tmp_path / "run",
        max_steps=3,
        learning_rate=1e-3,
        lr_schedule="linear",
        final_learning_rate=2e-4,
        group_size=2,
        max_episode_steps=2,
        max_assistant_tokens=16,
        kl_coef=0.01,  # every trajectory is trained, so every update takes its step
    )
    inner = _RecordingAdam(tiny_backend(config, qwen_tokenizer))
    trainer = toy_env_trainer(config, qwen_tokenizer, inner)
    reported = []
    try:
        for number in (1, 2, 3):
            metrics = await trainer.update(number)
            reported.append(metrics.backend.get("learning_rate"))
    finally:
        await trainer.close()
    assert inner.rates == pytest.approx([1e-3, 6e-4, 2e-4])
    assert reported == pytest.approx([1e-3, 6e-4, 2e-4])  # the update's metrics show it
