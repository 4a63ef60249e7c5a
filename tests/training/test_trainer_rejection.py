"""Rejection-sampling fine-tuning through the Trainer: the real tiny model plays the toy env,
the filter decides, and the update's one cross-entropy step trains exactly the kept
trajectories' datums."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.algo.datums import trajectory_to_datums
from agentrl.backends.base import LossName
from agentrl.core.types import Trajectory
from agentrl.training.rejection import RejectionSampling
from agentrl.training.trainer import Trainer
from tests.helpers.trainer_helpers import tiny_backend, toy_config, toy_env_trainer


class Recording:
    """The real backend, with each `forward_backward`'s datums and loss kept for the test."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[list[Any], LossName]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def forward_backward(self, datums: Any, loss: Any, config: Any) -> Any:
        self.calls.append((list(datums), LossName(loss)))
        return await self.inner.forward_backward(datums, loss, config)


async def _update(tmp_path: Path, tokenizer: Any, keep: Any) -> tuple[Recording, Any]:
    config = toy_config(
        tmp_path, max_steps=1, group_size=4, max_episode_steps=2, max_assistant_tokens=16
    )
    backend = Recording(tiny_backend(config, tokenizer))
    trainer = toy_env_trainer(config, tokenizer, backend, rejection=RejectionSampling(keep=keep))
    try:
        return backend, await trainer.update(1)
    finally:
        await trainer.close()


async def test_rft_trains_exactly_the_kept_trajectories(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    seen: list[Trajectory] = []
    kept: list[Trajectory] = []

    def keep(trajectory: Trajectory) -> bool:  # every other trajectory the filter is shown
        seen.append(trajectory)
        if len(seen) % 2 == 1 and all(t is not trajectory for t in kept):
            kept.append(trajectory)
        return any(t is trajectory for t in kept)

    backend, metrics = await _update(tmp_path, qwen_tokenizer, keep)
    ((datums, loss),) = backend.calls
    assert loss is LossName.CROSS_ENTROPY
    assert 0 < len(kept) < len({id(t) for t in seen})
    expected = [d for t in kept for d in trajectory_to_datums(t, [1.0] * len(t.turns))]
    assert len(datums) == len(expected)
    for got, want in zip(datums, expected, strict=True):
        assert np.array_equal(got.target_tokens, want.target_tokens)
        assert np.array_equal(got.mask, want.mask)
    assert metrics.trained_tokens == sum(d.num_assistant_tokens for d in expected)
    assert metrics.backend["rft/kept"] == len(kept)


async def test_an_update_that_keeps_nothing_takes_no_step(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    backend, metrics = await _update(tmp_path, qwen_tokenizer, lambda t: False)
    assert backend.calls == [] and metrics.loss is None
    assert metrics.backend["rft/kept"] == 0


def test_the_config_objective_chooses_the_trainers_mode(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """`objective` rft keeps the won trajectories without a `rejection` argument; opd without
    a `Distillation` is refused, naming what it needs."""
    from agentrl.training.rejection import won

    def trainer(**overrides: Any) -> Trainer:
        config = toy_config(tmp_path, **overrides)
        return toy_env_trainer(config, qwen_tokenizer, tiny_backend(config, qwen_tokenizer))

    assert trainer().rejection is None
    rft = trainer(objective="rft").rejection
    assert rft is not None and rft.keep is won
    with pytest.raises(ValueError, match=r"objective opd needs Trainer\(distillation="):
        trainer(objective="opd", teacher_model=str(tmp_path / "teacher.json"))


async def test_imitation_trains_the_behaviour_models_trajectories(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """`Trainer(behaviour=...)` with RFT: another model (the tiny model after five steps on one
    reply) plays every game and the student is trained on what it played: each trained datum's
    sampling logprobs are that model's logprobs of its tokens (to 1e-3), not the student's."""
    from agentrl.algo.datums import completion_datum
    from agentrl.algo.distillation import datum_tokens, teacher_targets
    from agentrl.backends.base import AdamParams, LossConfig

    config = toy_config(
        tmp_path / "student",
        max_steps=1,
        group_size=4,
        max_episode_steps=2,
        max_assistant_tokens=16,
        seed=0,
    )
    other = tiny_backend(toy_config(tmp_path / "other"), qwen_tokenizer)
    reply = qwen_tokenizer.encode("take the mug")
    lesson = completion_datum(
        qwen_tokenizer.encode("You are in a room."), reply, [0.0] * len(reply)
    )
    for _ in range(5):  # another model: the same tiny model after a few steps on one reply
        await other.forward_backward([lesson], LossName.CROSS_ENTROPY, LossConfig())
        await other.optim_step(AdamParams(learning_rate=1e-2))
    teacher = await other.sampler()
    student = Recording(tiny_backend(config, qwen_tokenizer))
    own = await student.inner.sampler()

    async def behaviour() -> Any:
        return teacher

    trainer = toy_env_trainer(
        config,
        qwen_tokenizer,
        student,
        rejection=RejectionSampling(keep=lambda t: True),
        behaviour=behaviour,
    )
    try:
        metrics = await trainer.update(1)
    finally:
        await trainer.close()
    ((datums, loss),) = student.calls
    assert loss is LossName.CROSS_ENTROPY and metrics.backend["rft/kept"] == 8
    for datum in datums:
        on = datum.mask > 0
        by_teacher = teacher_targets(datum, await teacher.compute_logprobs(datum_tokens(datum)))
        by_student = teacher_targets(datum, await own.compute_logprobs(datum_tokens(datum)))
        np.testing.assert_allclose(datum.logprobs[on], by_teacher[on], atol=1e-3)
        assert np.abs(datum.logprobs[on] - by_student[on]).mean() > 0.1  # 0.2-0.7 measured


def test_behaviour_is_refused_outside_imitation(tmp_path: Path, qwen_tokenizer: Any) -> None:
    config = toy_config(tmp_path)

    async def behaviour() -> Any:
        raise AssertionError("never sampled")

    with pytest.raises(ValueError, match=r"pass rejection=RejectionSampling"):
        toy_env_trainer(
            config, qwen_tokenizer, tiny_backend(config, qwen_tokenizer), behaviour=behaviour
        )
