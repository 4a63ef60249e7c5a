"""`LocalBackend(full_finetune=True)`: every weight trains, and checkpoints round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.backends.base import AdamParams, LossConfig, LossName  # noqa: E402
from agentrl.backends.local import LocalBackend  # noqa: E402


def _backend(qwen_tokenizer: object, tmp_path: Path) -> LocalBackend:
    return LocalBackend.tiny(
        qwen_tokenizer, seed=0, device="cpu", full_finetune=True, checkpoint_dir=tmp_path
    )


async def test_full_finetune_trains_every_weight_and_round_trips(
    qwen_tokenizer: object, tmp_path: Path, datum_factory: object
) -> None:
    backend = _backend(qwen_tokenizer, tmp_path)
    params = backend.trainable_parameters()
    assert len(params) == len(list(backend.engine.model.parameters()))
    before = [p.detach().clone() for p in params]
    datums = [datum_factory(seed, 512) for seed in range(3)]  # type: ignore[operator]
    await backend.forward_backward(datums, LossName.CROSS_ENTROPY, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=1e-2))
    moved = [not torch.equal(a, p.detach()) for a, p in zip(before, params, strict=True)]
    assert all(moved)  # embeddings and norms too, not adapters only
    ref = await backend.save("one")
    tokens = list(range(1, 20))
    saved = backend.engine.sequence_logprobs(tokens)
    await backend.optim_step(AdamParams(learning_rate=1e-2))  # no grads: weights unchanged
    await backend.forward_backward(datums, LossName.CROSS_ENTROPY, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=1e-2))
    assert not torch.allclose(backend.engine.sequence_logprobs(tokens), saved)
    fresh = _backend(qwen_tokenizer, tmp_path / "fresh")
    await fresh.load(ref)
    assert torch.allclose(fresh.engine.sequence_logprobs(tokens), saved)
    assert fresh.steps == 1
