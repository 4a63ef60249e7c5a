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


def test_a_from_scratch_model_trains_float32_weights_even_on_cuda() -> None:
    """Adam on bf16 weights drops updates below bf16's resolution (shown below on the CPU), so
    a model whose every weight is trained gets float32 weights; LoRA keeps the device's dtype
    (its adapters are float32 anyway)."""
    from agentrl.backends.local.model import tiny_dtype

    cuda = torch.device("cuda")
    assert tiny_dtype(cuda, full_finetune=True) is torch.float32
    assert tiny_dtype(cuda, full_finetune=False) is torch.bfloat16
    assert tiny_dtype(torch.device("cpu"), full_finetune=False) is torch.float32
    weight = torch.ones(4, dtype=torch.bfloat16)  # an RMSNorm weight
    assert torch.equal(weight - 1e-3, weight)  # a step of lr 1e-3 is lost in bf16
    backend = LocalBackend.tiny(full_finetune=True, dtype=torch.bfloat16)
    assert {p.dtype for p in backend.trainable_parameters()} == {torch.bfloat16}
    assert {p.dtype for p in LocalBackend.tiny(full_finetune=True).trainable_parameters()} == {
        torch.float32
    }


async def test_a_frozen_reference_is_the_kl_penalty_of_full_finetuning(
    qwen_tokenizer: object, tmp_path: Path, datum_factory: object
) -> None:
    """Full fine-tuning has no adapter to switch off: a KL step without a reference is refused
    naming the fix; `freeze_reference` copies the weights, so the penalty is 0 until a step
    moves them, and the reference's logprobs are then those of the frozen weights (a direct
    forward pass), not the live ones."""
    backend = _backend(qwen_tokenizer, tmp_path)
    datums = [datum_factory(seed, 512) for seed in range(2)]  # type: ignore[operator]
    kl = LossConfig(kl_coef=1.0)
    with pytest.raises(ValueError, match="freeze_reference"):
        await backend.forward_backward(datums, LossName.PPO, kl)
    backend.engine.model.zero_grad(set_to_none=True)
    tokens = list(range(1, 20))
    frozen = backend.engine.sequence_logprobs(tokens)
    backend.freeze_reference()
    same = await backend.forward_backward(datums, LossName.PPO, kl)
    assert same.metrics["kl_ref"] == pytest.approx(0.0, abs=1e-7)
    await backend.optim_step(AdamParams(learning_rate=1e-2))
    moved = await backend.forward_backward(datums, LossName.PPO, kl)
    assert moved.metrics["kl_ref"] > 1e-4
    live = backend.engine.sequence_logprobs(tokens)
    assert not torch.allclose(live, frozen)
    ids = torch.tensor([tokens])
    where = torch.ones(1, len(tokens) - 1, dtype=torch.bool)
    reference = backend.engine.reference_logprobs(
        ids[:, :-1], torch.ones_like(ids[:, :-1]), where, ids[0, 1:]
    )
    torch.testing.assert_close(reference, frozen, rtol=0, atol=1e-6)
    assert all(not p.requires_grad for p in backend.engine.reference.parameters())
