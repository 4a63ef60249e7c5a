"""On-policy distillation through the Trainer: the real tiny student samples the toy env, a
teacher (another real tiny model) scores the student's tokens, and the update trains on
teacher - student per token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import torch

from agentrl.algo.distillation import datum_tokens, teacher_targets
from agentrl.backends.base import LossName
from agentrl.config.names import DistillSignal
from agentrl.training.distillation import Distillation
from agentrl.training.trainer import Trainer
from tests.helpers.trainer_helpers import (
    RecordingBackend,
    tiny_backend,
    toy_config,
    toy_env_trainer,
)


def _distilling_trainer(
    config: Any, tokenizer: Any, distillation: Distillation, backend: Any = None
) -> Trainer:
    """A toy-env trainer distilling with `distillation` (backend: a new tiny one)."""
    if backend is None:
        backend = tiny_backend(config, tokenizer)
    return toy_env_trainer(config, tokenizer, backend, distillation=distillation)


async def test_an_update_trains_teacher_minus_student_on_every_trajectory(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    config = toy_config(
        tmp_path / "run",
        max_steps=1,
        loss="importance_sampling",
        group_size=2,
        max_episode_steps=2,
        max_assistant_tokens=24,
    )
    student = RecordingBackend(tiny_backend(config, qwen_tokenizer))
    teacher_config = toy_config(tmp_path / "teacher", seed=config.seed + 1)
    teacher = await tiny_backend(teacher_config, qwen_tokenizer).sampler()
    trainer = _distilling_trainer(
        config, qwen_tokenizer, Distillation(teacher, kl_coef=1.0), student
    )
    try:
        metrics = await trainer.update(1)
    finally:
        await trainer.close()
    (datums,) = student.batches
    assert len(datums) == config.games_per_batch * config.group_size  # none skipped
    gaps, scored = [], []
    for datum in datums:
        q = teacher_targets(datum, await teacher.compute_logprobs(datum_tokens(datum)))
        on = datum.mask > 0
        np.testing.assert_allclose(datum.advantages[on], q[on] - datum.logprobs[on], atol=1e-5)
        assert np.all(datum.advantages[~on] == 0)
        gaps.append(datum.logprobs[on] - q[on])
        scored.append(q[on])
    assert metrics.backend["distill/reverse_kl"] == pytest.approx(
        float(np.concatenate(gaps).mean()), abs=1e-5
    )
    assert metrics.backend["distill/teacher_logprob"] == pytest.approx(
        float(np.concatenate(scored).mean()), abs=1e-5
    )
    assert metrics.trained_tokens == sum(int(d.mask.sum()) for d in datums)


async def test_a_distillation_needs_a_teacher_and_no_streaming(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    with pytest.raises(TypeError, match="compute_logprobs"):
        Distillation(object())  # type: ignore[arg-type]
    config = toy_config(tmp_path / "run", stream_groups=True)
    backend = tiny_backend(config, qwen_tokenizer)
    with pytest.raises(ValueError, match="advantage_clip must be > 0"):
        Distillation(await backend.sampler(), advantage_clip=-1.0)
    with pytest.raises(ValueError, match="turn stream_groups off"):
        _distilling_trainer(config, qwen_tokenizer, Distillation(await backend.sampler()), backend)


async def test_a_resumed_distillation_run_continues_identically(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """Two updates straight, or one, a stop, and a resume: the same second update (its
    teacher metrics and loss) and the same final weights."""
    small = dict(
        loss="importance_sampling",
        group_size=2,
        max_episode_steps=2,
        max_assistant_tokens=16,
        save_every=1,
    )
    teacher = await tiny_backend(toy_config(tmp_path / "teacher", seed=7), qwen_tokenizer).sampler()
    teach = Distillation(teacher)
    straight = _distilling_trainer(
        toy_config(tmp_path / "straight", max_steps=2, **small), qwen_tokenizer, teach
    )
    done = await straight.run()
    first = toy_config(tmp_path / "split", max_steps=1, **small)
    await _distilling_trainer(first, qwen_tokenizer, teach).run()
    again = first.model_copy(update={"max_steps": 2, "resume": True})
    resumed = _distilling_trainer(again, qwen_tokenizer, teach)
    result = await resumed.run()
    assert [m.update for m in result.metrics] == [2]
    ours, theirs = result.metrics[0], done.metrics[1]
    for key in ("distill/reverse_kl", "distill/teacher_logprob"):
        assert ours.backend[key] == theirs.backend[key]
    assert ours.loss == theirs.loss and ours.trained_tokens == theirs.trained_tokens
    weights = dict(straight.backend.engine.model.named_parameters())  # type: ignore[attr-defined]
    for name, p in resumed.backend.engine.model.named_parameters():  # type: ignore[attr-defined]
        assert torch.equal(p, weights[name]), name


async def test_teacher_tokens_train_cross_entropy_towards_the_teachers_labels(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """`signal=teacher_tokens`: every trained target becomes the teacher's most likely token
    in the student's context (checked against a direct forward pass of the teacher), the
    student's tokens stay the inputs, and the update trains cross entropy."""
    config = toy_config(
        tmp_path / "run", max_steps=1, group_size=2, max_episode_steps=2, max_assistant_tokens=24
    )
    student = RecordingBackend(tiny_backend(config, qwen_tokenizer))
    teacher_backend = tiny_backend(
        toy_config(tmp_path / "teacher", seed=config.seed + 1), qwen_tokenizer
    )
    teacher = await teacher_backend.sampler()
    teach = Distillation(teacher, signal=DistillSignal.TEACHER_TOKENS)
    trainer = _distilling_trainer(config, qwen_tokenizer, teach, student)
    try:
        metrics = await trainer.update(1)
    finally:
        await trainer.close()
    (datums,) = student.batches
    assert student.losses == [LossName.CROSS_ENTROPY]
    agreed = trained = 0
    for datum in datums:
        with torch.no_grad():  # the teacher's choice after each prefix of the student's tokens
            ids = torch.tensor([datum.model_input.tolist()])
            direct = teacher_backend.engine.model(input_ids=ids).logits[0].argmax(-1).numpy()
        on = datum.mask > 0
        np.testing.assert_array_equal(datum.target_tokens[on], direct[on])
        # untrained targets are still the student's next tokens (the inputs shifted by one)
        sampled = datum.model_input[1:]
        np.testing.assert_array_equal(datum.target_tokens[:-1][~on[:-1]], sampled[~on[:-1]])
        # agreement, known for every trained position but the last (its sampled token is
        # not among the inputs)
        agreed += int((sampled[on[:-1]] == direct[:-1][on[:-1]]).sum())
        trained += int(on.sum())
    assert trained > 0
    share = metrics.backend["distill/agreement"]
    assert agreed / trained <= share <= (agreed + len(datums)) / trained
    assert share < 0.5  # two differently seeded tiny models mostly disagree
    assert "distill/reverse_kl" not in metrics.backend
    assert metrics.sampler_kl is None  # the labels are not the sampled tokens: no comparison


async def test_teacher_tokens_need_a_labelling_teacher_and_no_reward_mix(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    class ScoresOnly:
        async def compute_logprobs(self, tokens: Any) -> list[float | None]:
            return [None] * len(tokens)

    with pytest.raises(TypeError, match="top_tokens"):
        Distillation(ScoresOnly(), signal=DistillSignal.TEACHER_TOKENS)
    sampler = await tiny_backend(toy_config(tmp_path / "t"), qwen_tokenizer).sampler()
    with pytest.raises(ValueError, match="reward_coef and advantage_clip do not apply"):
        Distillation(sampler, reward_coef=1.0, signal=DistillSignal.TEACHER_TOKENS)
    top = await sampler.top_tokens([1, 2, 3])
    assert top[0] is None and len(top) == 3 and all(isinstance(t, int) for t in top[1:])
