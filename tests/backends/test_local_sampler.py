"""Local sampler on a tiny random Qwen3 model over the real Qwen tokenizer: logprobs match a
forward pass, the KV cache changes cost but not results, and turn-after-turn prefill is
only the new tokens."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.backends.base import SamplingParams  # noqa: E402
from agentrl.backends.local import LocalBackend, LocalSampler  # noqa: E402
from agentrl.types import CompletionStop  # noqa: E402

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def backend(qwen_tokenizer: Any) -> LocalBackend:
    return LocalBackend.tiny(qwen_tokenizer, seed=0, device="cpu")


def chat_prompt(tokenizer: Any, text: str) -> list[int]:
    messages = [
        {"role": "system", "content": "You are a household agent. Use one tool call per turn."},
        {"role": "user", "content": text},
    ]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"])


def recomputed(backend: LocalBackend, prompt: list[int], tokens: tuple[int, ...]) -> np.ndarray:
    logprobs = backend.engine.sequence_logprobs(prompt + list(tokens))
    return logprobs[len(prompt) - 1 :].numpy()


async def test_sampled_logprobs_match_a_forward_pass(backend, qwen_tokenizer) -> None:
    sampler = await backend.sampler()
    prompt = chat_prompt(qwen_tokenizer, "Your task is to: put the apple in the box.")
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=7)
    completions = await sampler.sample(prompt, 4, params)
    assert len(completions) == 4
    assert len({c.tokens for c in completions}) > 1  # K independent samples
    for completion in completions:
        assert len(completion.tokens) == 12
        assert completion.stop_reason is CompletionStop.LENGTH
        np.testing.assert_allclose(
            completion.logprobs, recomputed(backend, prompt, completion.tokens), atol=TOLERANCE
        )


async def test_multi_turn_prefills_only_new_tokens(backend, qwen_tokenizer) -> None:
    sampler = LocalSampler(backend.engine, seed=1)
    prompt = chat_prompt(qwen_tokenizer, "Your task is to: put the mug in the bin.")
    params = SamplingParams(max_tokens=8, seed=3)
    first = await sampler.sample_detailed(prompt, 3, params)
    assert first.prefill_tokens == len(prompt) and first.reused_tokens == 0
    tool = qwen_tokenizer.encode("<|im_end|>\n<|im_start|>user\n<tool_response>\nOK\n")
    # Each branch continues concurrently; each turn's prompt extends the previous one.
    prompts = [prompt + list(c.tokens) + tool for c in first.completions]
    second = await asyncio.gather(*(sampler.sample_detailed(p, 1, params) for p in prompts))
    for p, result, previous in zip(prompts, second, first.completions, strict=True):
        # Only the last sampled token (never fed to the model) and the tool message are new.
        assert result.prefill_tokens == len(tool) + 1
        assert result.reused_tokens == len(p) - len(tool) - 1
        (completion,) = result.completions
        np.testing.assert_allclose(
            completion.logprobs, recomputed(backend, p, completion.tokens), atol=TOLERANCE
        )
        assert previous.tokens  # completions were non-empty
    stats = sampler.stats
    assert stats.prefill_tokens == len(prompt) + 3 * (len(tool) + 1)
    assert stats.prompt_tokens == len(prompt) + sum(len(p) for p in prompts)


async def test_kv_reuse_does_not_change_results(backend, qwen_tokenizer) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    outputs = []
    for reuse in (True, False):
        sampler = LocalSampler(backend.engine, reuse_kv=reuse)
        prompt = chat_prompt(qwen_tokenizer, "Your task is to: put the pen in the box.")
        transcript = []
        for turn in range(3):
            (completion,) = await sampler.sample(prompt, 1, greedy)
            transcript.append(completion)
            prompt = prompt + list(completion.tokens) + qwen_tokenizer.encode(f"\nstep {turn}\n")
        outputs.append((transcript, sampler.stats))
    (cached, cached_stats), (plain, plain_stats) = outputs
    assert [c.tokens for c in cached] == [c.tokens for c in plain]
    for a, b in zip(cached, plain, strict=True):
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=TOLERANCE)
    assert plain_stats.reused_tokens == 0
    assert cached_stats.prefill_tokens < plain_stats.prefill_tokens / 2


async def test_stop_tokens_and_max_tokens(backend, qwen_tokenizer) -> None:
    sampler = LocalSampler(backend.engine)
    prompt = chat_prompt(qwen_tokenizer, "hello")
    greedy = SamplingParams(temperature=0.0, max_tokens=5)
    (free,) = await sampler.sample(prompt, 1, greedy)
    stop_at = free.tokens[2]
    (stopped,) = await sampler.sample(
        prompt, 1, SamplingParams(temperature=0.0, max_tokens=5, stop_tokens=(stop_at,))
    )
    first_hit = free.tokens.index(stop_at)
    assert stopped.tokens == free.tokens[: first_hit + 1]
    assert stopped.stop_reason is CompletionStop.STOP
    assert free.stop_reason is CompletionStop.LENGTH


async def test_seeded_sampling_is_reproducible_and_top_p_narrows(backend, qwen_tokenizer) -> None:
    prompt = chat_prompt(qwen_tokenizer, "look")
    params = SamplingParams(max_tokens=6, seed=11)
    a = await LocalSampler(backend.engine).sample(prompt, 2, params)
    b = await LocalSampler(backend.engine).sample(prompt, 2, params)
    assert [c.tokens for c in a] == [c.tokens for c in b]
    tiny_p = SamplingParams(max_tokens=6, top_p=1e-6, seed=5)
    greedy = SamplingParams(max_tokens=6, temperature=0.0)
    (nucleus,) = await LocalSampler(backend.engine).sample(prompt, 1, tiny_p)
    (argmax,) = await LocalSampler(backend.engine).sample(prompt, 1, greedy)
    assert nucleus.tokens == argmax.tokens


async def test_bad_prompts_are_rejected(backend) -> None:
    sampler = await backend.sampler()
    with pytest.raises(ValueError, match="empty"):
        await sampler.sample([], 1, SamplingParams())
    with pytest.raises(ValueError, match="outside the model vocabulary"):
        await sampler.sample([1, 10**7], 1, SamplingParams())
