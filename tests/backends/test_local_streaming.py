"""Streaming one batch over several calls on the local backend: the parts' gradients,
rescaled at `finish`, are the gradient of one call over the whole batch (real torch steps)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.backends.base import LossConfig, LossName, LossNormalisation  # noqa: E402
from agentrl.backends.local import LocalBackend  # noqa: E402
from agentrl.backends.local.behaviour import TrainerBehaviour  # noqa: E402
from agentrl.backends.streaming import open_stream  # noqa: E402
from tests.backends.test_local_training import ADAM, grads, sampled_datums, tiny  # noqa: E402


async def _warm(backend: LocalBackend, tokenizer: Any) -> None:
    """One step first, so the LoRA B matrices are not zero and every adapter has a gradient."""
    datums = await sampled_datums(backend, tokenizer, 2, seed=9)
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    await backend.optim_step(ADAM)


CASES = [
    (LossName.PPO, LossNormalisation.TOKENS),
    (LossName.PPO, LossNormalisation.SEQUENCE),
    (LossName.GSPO, LossNormalisation.SEQUENCE),
    (LossName.CISPO, LossNormalisation.CONSTANT),
]


@pytest.mark.parametrize(("loss", "normalisation"), CASES)
async def test_streamed_parts_give_the_gradient_of_one_call(
    qwen_tokenizer, tmp_path, loss: LossName, normalisation: LossNormalisation
) -> None:
    config = LossConfig(normalisation=normalisation, norm_constant=64.0)
    backend = tiny(qwen_tokenizer, tmp_path)
    await _warm(backend, qwen_tokenizer)
    datums = await sampled_datums(backend, qwen_tokenizer, 5, seed=3)
    whole = await backend.forward_backward(datums, loss, config)
    g_whole = grads(backend)
    backend.engine.model.zero_grad(set_to_none=True)

    stream = backend.open_stream(loss, config)
    for part in (datums[:1], datums[1:3], datums[3:]):  # parts of 1, 2 and 2 datums
        await stream.add(part)
    streamed = await stream.finish()
    g_streamed = grads(backend)

    assert len(g_streamed) == len(g_whole) > 0
    assert any(float(g.abs().max()) > 0 for g in g_whole)
    for a, b in zip(g_whole, g_streamed, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)
    assert streamed.num_tokens == whole.num_tokens
    assert streamed.loss == pytest.approx(whole.loss, rel=1e-5, abs=1e-7)
    for key in ("loss_sum", "loss_per_token", "ratio_mean", "clip_fraction", "approx_kl"):
        assert streamed.metrics[key] == pytest.approx(whole.metrics[key], rel=1e-5, abs=1e-7)
    assert streamed.metrics["datums"] == 5.0 and streamed.metrics["parts"] == 3.0
    assert streamed.mismatch is not None and whole.mismatch is not None
    assert streamed.mismatch.tokens == whole.mismatch.tokens
    assert streamed.mismatch.sampler_kl == pytest.approx(whole.mismatch.sampler_kl, rel=1e-5)
    assert streamed.mismatch.max_abs_diff == pytest.approx(whole.mismatch.max_abs_diff)


async def test_streamed_step_gives_the_same_weights(qwen_tokenizer, tmp_path) -> None:
    """Two identical backends, one trained in one call and one streamed: the same LoRA
    weights after the optimizer step (grad clipping sees the rescaled gradient)."""
    left = tiny(qwen_tokenizer, tmp_path / "a")
    right = tiny(qwen_tokenizer, tmp_path / "b")
    datums = await sampled_datums(left, qwen_tokenizer, 4, seed=5)
    await left.forward_backward(datums, LossName.PPO, LossConfig())
    signal = [p.grad.detach().abs() > 1e-6 for p in left.trainable_parameters()]
    await left.optim_step(ADAM)
    stream = right.open_stream(LossName.PPO, LossConfig())
    await stream.add(datums[:3])
    await stream.add(datums[3:])
    await stream.finish()
    before = [p.detach().clone() for p in right.trainable_parameters()]
    await right.optim_step(ADAM)
    moved = max(
        float((p.detach() - b).abs().max())
        for p, b in zip(right.trainable_parameters(), before, strict=True)
    )
    assert moved > 1e-3  # the step did move the weights
    # Adam's first step is about lr * g / (|g| + eps): where g is float noise (|g| near eps,
    # 1e-8) the two sums of the same terms differ in relative terms and so may the step, by up
    # to lr. Where the gradient is signal (|g| > 1e-6) the weights must agree to 1e-5.
    pairs = zip(left.trainable_parameters(), right.trainable_parameters(), signal, strict=True)
    for a, b, real in pairs:
        torch.testing.assert_close(b.detach()[real], a.detach()[real], rtol=1e-5, atol=1e-5)
        assert float((b.detach() - a.detach()).abs().max()) <= 2 * ADAM.learning_rate


async def test_abort_drops_the_accumulated_gradient(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 2)
    stream = backend.open_stream(LossName.PPO, LossConfig())
    await stream.add(datums)
    assert grads(backend)
    await stream.abort()
    assert grads(backend) == []
    with pytest.raises(RuntimeError, match="finished"):
        await stream.add(datums)


async def test_a_stream_finishes_once(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    stream = backend.open_stream(LossName.PPO, LossConfig())
    with pytest.raises(RuntimeError, match="at least one part"):
        await stream.finish()
    await stream.add(await sampled_datums(backend, qwen_tokenizer, 1))
    await stream.finish()
    with pytest.raises(RuntimeError):
        await stream.finish()  # dividing twice would shrink the gradient


async def test_trainer_behaviour_streams_with_recomputed_logprobs(qwen_tokenizer, tmp_path) -> None:
    """`--behaviour-logprobs trainer` streams too: each part's logprobs are recomputed and the
    mismatch against the sampler's is reported over every part."""
    backend = tiny(qwen_tokenizer, tmp_path)
    wrapped = TrainerBehaviour(backend, backend.engine)
    datums = await sampled_datums(backend, qwen_tokenizer, 3, seed=4)
    whole = await wrapped.forward_backward(datums, LossName.PPO, LossConfig())
    g_whole = grads(backend)
    backend.engine.model.zero_grad(set_to_none=True)
    stream = open_stream(wrapped, LossName.PPO, LossConfig())
    await stream.add(datums[:2])
    await stream.add(datums[2:])
    streamed = await stream.finish()
    for a, b in zip(g_whole, grads(backend), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)
    assert streamed.mismatch is not None and whole.mismatch is not None
    assert streamed.mismatch.sampler_kl == pytest.approx(whole.mismatch.sampler_kl, rel=1e-5)
    assert streamed.mismatch.tokens == whole.mismatch.tokens


async def test_a_stream_refuses_gradients_no_optimizer_step_used(qwen_tokenizer, tmp_path) -> None:
    """`finish` divides what the parameters hold: gradients an earlier forward_backward left
    behind would be divided and stepped with the new batch, so the stream refuses them."""
    backend = tiny(qwen_tokenizer, tmp_path)
    await _warm(backend, qwen_tokenizer)
    datums = await sampled_datums(backend, qwen_tokenizer, 2, seed=4)
    await backend.forward_backward(datums, LossName.PPO, LossConfig())  # never stepped
    stream = backend.open_stream(LossName.PPO, LossConfig())
    with pytest.raises(RuntimeError, match="no optim_step used"):
        await stream.add(datums)
    await stream.abort()  # discards them
    fresh = backend.open_stream(LossName.PPO, LossConfig())
    await fresh.add(datums)
    assert (await fresh.finish()).num_tokens > 0
