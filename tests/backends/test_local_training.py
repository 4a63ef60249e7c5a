"""Local training: the loss equals a reference recomputation, micro-batching does not change
the gradient, only LoRA weights move, checkpoints round-trip, caches follow the weights."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.backends.base import (  # noqa: E402
    AdamParams,
    LossConfig,
    LossName,
    SamplingParams,
)
from agentrl.backends.local import LocalBackend  # noqa: E402
from agentrl.datums import Datum, trajectory_to_datum  # noqa: E402
from agentrl.types import (  # noqa: E402
    ParsedAction,
    StopReason,
    TaskInfo,
    Trajectory,
    Turn,
    TurnStatus,
)

ADAM = AdamParams(learning_rate=1e-2, grad_clip_norm=1.0)


def tiny(tokenizer: Any, tmp_path: Any, **kw: Any) -> LocalBackend:
    return LocalBackend.tiny(tokenizer, seed=0, device="cpu", checkpoint_dir=tmp_path, **kw)


async def sampled_datums(
    backend: LocalBackend, tokenizer: Any, count: int, seed: int = 0, stale: float = 0.4
) -> list[Datum]:
    """Two-turn trajectories sampled from the model, turned into datums by agentrl.datums."""
    sampler = await backend.sampler()
    rng = np.random.default_rng(seed)
    datums = []
    for index in range(count):
        prompt = tokenizer.encode(f"<|im_start|>user\nTask {index}: carry the cup.<|im_end|>\n")
        turns = []
        for turn in range(2):
            params = SamplingParams(max_tokens=5 + index, seed=seed * 100 + index * 10 + turn)
            (completion,) = await sampler.sample(prompt, 1, params)
            turns.append(
                Turn(
                    prompt_tokens=tuple(prompt),
                    completion_tokens=completion.tokens,
                    logprobs=completion.logprobs,
                    assistant_text="",
                    parsed=ParsedAction(action="look"),
                    status=TurnStatus.EXECUTED,
                    env_step=None,
                )
            )
            prompt = prompt + list(completion.tokens) + tokenizer.encode(f"\nobs {turn}\n")
        trajectory = Trajectory(
            turns=tuple(turns),
            stop_reason=StopReason.ENV_DONE,
            won=False,
            group_id="g",
            task=TaskInfo(task_id="t"),
        )
        advantage = float(rng.normal())
        datum = trajectory_to_datum(trajectory, [advantage, advantage])
        # Make the sampler "stale" so ratios spread over both clipping branches.
        noise = rng.normal(0.0, stale, len(datum)).astype(np.float32) * datum.mask
        datums.append(
            Datum(
                datum.model_input,
                datum.target_tokens,
                datum.logprobs + noise,
                datum.advantages,
                datum.mask,
            )
        )
    return datums


def reference_loss(backend: LocalBackend, datums: list[Datum], loss: LossName) -> float:
    """Per-token loss recomputed independently: full-sequence logprobs, plain Python math."""
    total, tokens = 0.0, 0.0
    for datum in datums:
        full = [*datum.model_input.tolist(), int(datum.target_tokens[-1])]
        new = backend.engine.sequence_logprobs(full).numpy()
        trained = np.flatnonzero(datum.mask)
        seq_ratio = math.exp(float(np.mean(new[trained] - datum.logprobs[trained])))
        for j in trained:
            r = math.exp(new[j] - datum.logprobs[j])
            a = float(datum.advantages[j])
            if loss is LossName.PPO:
                total += -min(r * a, min(max(r, 0.8), 1.2) * a)
            elif loss is LossName.IMPORTANCE_SAMPLING:
                total += -r * a
            elif loss is LossName.CISPO:
                total += -min(max(r, 0.8), 1.2) * a * new[j]
            elif loss is LossName.GSPO:
                total += -min(seq_ratio * a, min(max(seq_ratio, 0.8), 1.2) * a)
            else:
                total += -new[j]
            tokens += 1
    return total / tokens


async def test_first_step_mismatch_is_zero(qwen_tokenizer, tmp_path) -> None:
    """Sampler and trainer are the same weights on the first step: KL ~ 0; stale logprobs
    (what an off-policy or mis-tokenised batch looks like) show up in the metric."""
    backend = tiny(qwen_tokenizer, tmp_path)
    fresh = await sampled_datums(backend, qwen_tokenizer, 3, stale=0.0)
    result = await backend.forward_backward(fresh, LossName.PPO, LossConfig(0.8, 1.2))
    assert result.mismatch is not None
    assert result.mismatch.tokens == sum(d.num_assistant_tokens for d in fresh)
    assert result.mismatch.sampler_kl < 1e-10 and result.mismatch.max_abs_diff < 1e-4
    stale = await sampled_datums(backend, qwen_tokenizer, 3, stale=0.4)
    shifted = await backend.forward_backward(stale, LossName.PPO, LossConfig(0.8, 1.2))
    assert shifted.mismatch is not None and shifted.mismatch.sampler_kl > 1e-3
    assert shifted.mismatch.max_abs_diff > 0.1


@pytest.mark.parametrize("loss", list(LossName))
async def test_forward_backward_loss_equals_reference(qwen_tokenizer, tmp_path, loss) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 3)
    result = await backend.forward_backward(datums, loss, LossConfig(0.8, 1.2))
    assert result.num_tokens == sum(d.num_assistant_tokens for d in datums)
    assert result.loss == pytest.approx(reference_loss(backend, datums, loss), rel=1e-4, abs=1e-5)
    if loss is LossName.PPO:
        assert 0.0 < result.metrics["clip_fraction"] < 1.0


def grads(backend: LocalBackend) -> list[torch.Tensor]:
    return [p.grad.clone() for p in backend.trainable_parameters() if p.grad is not None]


async def test_micro_batching_does_not_change_the_gradient(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 4, seed=1)
    backend.micro_batch_tokens = 1 << 20
    whole = await backend.forward_backward(datums, LossName.PPO, LossConfig())
    g_whole = grads(backend)
    backend.engine.model.zero_grad(set_to_none=True)
    backend.micro_batch_tokens = max(len(d) for d in datums)  # one datum per micro-batch
    split = await backend.forward_backward(datums, LossName.PPO, LossConfig())
    assert split.metrics["micro_batches"] == 4 and whole.metrics["micro_batches"] == 1
    assert split.loss == pytest.approx(whole.loss, rel=1e-5)
    g_split = grads(backend)
    assert len(g_split) == len(g_whole) > 0
    for a, b in zip(g_whole, g_split, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


async def test_only_lora_parameters_change(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    before = {n: p.detach().clone() for n, p in backend.engine.model.named_parameters()}
    datums = await sampled_datums(backend, qwen_tokenizer, 2)
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    metrics = await backend.optim_step(ADAM)
    assert metrics["grad_norm"] > 0
    changed = {
        n for n, p in backend.engine.model.named_parameters() if not torch.equal(p, before[n])
    }
    assert changed, "nothing was trained"
    assert all("lora_" in n for n in changed), sorted(changed)[:5]
    assert any("lora_B" in n and "lm_head" in n for n in changed)  # unembedding adapter too


async def test_save_load_reproduces_logits_and_optimizer(qwen_tokenizer, tmp_path) -> None:
    trained = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(trained, qwen_tokenizer, 2)
    for _ in range(2):
        await trained.forward_backward(datums, LossName.IMPORTANCE_SAMPLING, LossConfig())
        await trained.optim_step(ADAM)
    ref = await trained.save("update-0002")
    probe = list(datums[0].model_input)
    expected = trained.engine.sequence_logprobs(probe)

    restored = tiny(qwen_tokenizer, tmp_path)
    assert not torch.allclose(restored.engine.sequence_logprobs(probe), expected)
    await restored.load(ref)
    torch.testing.assert_close(restored.engine.sequence_logprobs(probe), expected)
    assert restored.steps == 2
    # The optimizer state came back too: one more identical step gives identical weights.
    for backend in (trained, restored):
        await backend.forward_backward(datums, LossName.IMPORTANCE_SAMPLING, LossConfig())
        await backend.optim_step(ADAM)
    torch.testing.assert_close(
        restored.engine.sequence_logprobs(probe), trained.engine.sequence_logprobs(probe)
    )
    sampler_only = tiny(qwen_tokenizer, tmp_path)
    await sampler_only.load_sampler_weights(ref.sampler_path)
    torch.testing.assert_close(sampler_only.engine.sequence_logprobs(probe), expected)


async def test_sampler_cache_is_dropped_when_weights_change(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    sampler = await backend.sampler()
    prompt = qwen_tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    (first,) = await sampler.sample(prompt, 1, SamplingParams(max_tokens=4, seed=0))
    datums = await sampled_datums(backend, qwen_tokenizer, 2)
    await backend.forward_backward(datums, LossName.CROSS_ENTROPY, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=5e-2))
    follow_up = prompt + list(first.tokens) + qwen_tokenizer.encode("\nok\n")
    result = await sampler.sample_detailed(follow_up, 1, SamplingParams(max_tokens=4, seed=0))
    assert result.reused_tokens == 0  # stale keys/values were not reused
    recomputed = backend.engine.sequence_logprobs(follow_up + list(result.completions[0].tokens))
    np.testing.assert_allclose(
        result.completions[0].logprobs, recomputed[len(follow_up) - 1 :].numpy(), atol=1e-4
    )


async def test_bad_datums_are_rejected(qwen_tokenizer, tmp_path) -> None:
    backend = tiny(qwen_tokenizer, tmp_path)
    ones = np.ones(3, dtype=np.float32)
    bad = Datum(np.array([1, 2, 10**7]), np.array([2, 3, 4]), ones, ones, ones)
    with pytest.raises(ValueError, match="datum 0: model_input has token ids outside"):
        await backend.forward_backward([bad], LossName.PPO, LossConfig())
    with pytest.raises(ValueError, match="no datums"):
        await backend.forward_backward([], LossName.PPO, LossConfig())


async def test_from_pretrained_loads_a_local_model(qwen_tokenizer, tmp_path) -> None:
    from agentrl.backends.local.model import qwen3_config, random_causal_lm, select_device

    config = qwen3_config("tiny", vocab_size=len(qwen_tokenizer), num_hidden_layers=1)
    model = random_causal_lm(config, seed=3, device=select_device("cpu"))
    model.save_pretrained(tmp_path / "model")
    qwen_tokenizer.save_pretrained(tmp_path / "model")
    probe = qwen_tokenizer.encode("You arrive at shelf 1.")
    with torch.no_grad():
        expected = torch.log_softmax(model(torch.tensor([probe])).logits[0, :-1], -1)
        expected = expected.gather(-1, torch.tensor(probe[1:])[:, None])[:, 0]
    backend = LocalBackend.from_pretrained(tmp_path / "model", device="cpu")
    assert len(backend.tokenizer) == len(qwen_tokenizer)
    assert backend.engine.default_stop_tokens == (qwen_tokenizer.eos_token_id,)
    torch.testing.assert_close(backend.engine.sequence_logprobs(probe), expected)
    with pytest.raises(FileNotFoundError, match="cannot load a causal LM"):
        LocalBackend.from_pretrained(tmp_path / "missing", device="cpu")


def test_device_selection() -> None:
    from agentrl.backends.local.model import default_dtype, select_device

    assert select_device("cpu").type == "cpu"
    assert default_dtype(select_device("cpu")) is torch.float32
    if not torch.cuda.is_available():
        assert select_device("auto").type == "cpu"
        with pytest.raises(ValueError, match="CUDA is not available"):
            select_device("cuda")


async def test_kl_penalty_is_zero_while_the_adapter_is_zero(qwen_tokenizer, tmp_path) -> None:
    """The reference is the model with its LoRA adapter disabled: with B = 0 (fresh adapter)
    policy and reference agree, so the penalty and its gradient vanish; after a step they do
    not (so the check can fail)."""
    from agentrl.backends.base import KLEstimator

    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 2, stale=0.0)
    for estimator in KLEstimator:
        config = LossConfig(kl_coef=1.0, kl_estimator=estimator)
        result = await backend.forward_backward(datums, LossName.PPO, config)
        plain = await backend.forward_backward(datums, LossName.PPO, LossConfig())
        assert result.metrics["kl_ref"] == pytest.approx(0.0, abs=1e-6)
        assert result.loss == pytest.approx(plain.loss, abs=1e-6)
        backend.engine.model.zero_grad(set_to_none=True)
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=0.05, grad_clip_norm=0.0))
    moved = await backend.forward_backward(datums, LossName.PPO, LossConfig(kl_coef=1.0))
    assert moved.metrics["kl_ref"] > 1e-4
    assert any(p.requires_grad for p in backend.trainable_parameters())  # adapter back on


@pytest.mark.parametrize("normalisation", ["sequence", "constant"])
async def test_other_normalisations_do_not_depend_on_micro_batching(
    qwen_tokenizer, tmp_path, normalisation
) -> None:
    from agentrl.backends.base import LossNormalisation

    config = LossConfig(normalisation=LossNormalisation(normalisation), norm_constant=50.0)
    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 4, seed=2)
    backend.micro_batch_tokens = 1 << 20
    whole = await backend.forward_backward(datums, LossName.GSPO, config)
    g_whole = grads(backend)
    backend.engine.model.zero_grad(set_to_none=True)
    backend.micro_batch_tokens = 1
    split = await backend.forward_backward(datums, LossName.GSPO, config)
    assert split.metrics["micro_batches"] == 4.0
    assert split.loss == pytest.approx(whole.loss, rel=1e-5)
    for a, b in zip(g_whole, grads(backend), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    tokens = await backend.forward_backward(datums, LossName.GSPO, LossConfig())
    assert tokens.loss != pytest.approx(whole.loss, rel=1e-3)  # the divisor does matter


async def test_the_segments_of_one_trajectory_are_one_sequence(qwen_tokenizer, tmp_path) -> None:
    """Two datums with one `sequence` key (two segments of a trajectory) count once under
    `sequence` normalisation and share one gspo ratio, however the datums are micro-batched."""
    from dataclasses import replace

    from agentrl.backends.base import LossNormalisation
    from agentrl.backends.local.training import batch_totals, micro_batches

    backend = tiny(qwen_tokenizer, tmp_path)
    datums = await sampled_datums(backend, qwen_tokenizer, 4, seed=5)
    keyed = [replace(d, sequence=key) for d, key in zip(datums, ["a", "a", "b", None], strict=True)]
    assert batch_totals(keyed)[1] == 3 and batch_totals(datums)[1] == 4
    assert micro_batches([5, 5, 5], 5, [0, 0, 1]) == [[0, 1], [2]]  # a sequence is not split
    assert micro_batches([9, 1, 2], 100, [0, 0, 1]) == [[2, 0, 1]]  # sorted, kept in order
    config = LossConfig(normalisation=LossNormalisation.SEQUENCE)
    results, gradients = [], []
    for budget in (1 << 20, 1):  # all at once; then one datum (or one sequence) per batch
        backend.micro_batch_tokens = budget
        results.append(await backend.forward_backward(keyed, LossName.GSPO, config))
        gradients.append(grads(backend))
        backend.engine.model.zero_grad(set_to_none=True)
    assert results[1].metrics["micro_batches"] == 3.0
    assert results[0].loss == pytest.approx(results[1].loss, rel=1e-5)
    for a, b in zip(*gradients, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    apart = await backend.forward_backward(datums, LossName.GSPO, config)
    assert apart.loss != pytest.approx(results[0].loss, rel=1e-4)  # the key does matter
