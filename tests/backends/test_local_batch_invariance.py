"""Batch-invariant local decoding: a request's completions do not depend on its batch-mates
nor on what the prefix KV cache held before it.

A request served alone, in a batch with others of other lengths (left padding), or with only
1-3 rows, gets bit-identical tokens and logprobs for the same seed, and so does a prompt
prefilled from nothing, after part of it was cached by another request, or continuing a
trajectory whose earlier tokens were decoded; keyed seeds make the rollout's draws independent
of arrival order (`agentrl.core.seeds`, `KeyedPolicySampler`).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentrl.backends.base import SamplingParams  # noqa: E402
from agentrl.backends.local import LocalBackend  # noqa: E402
from agentrl.backends.local.generation import GenRequest, GenResult, generate  # noqa: E402
from agentrl.backends.local.invariant import (  # noqa: E402
    DECODE_MIN_ROWS,
    DECODE_ROW_MULTIPLE,
    ROWWISE,
    decode_rows,
)
from agentrl.backends.local.kvcache import PrefixKVCache  # noqa: E402
from agentrl.core.seeds import derive_seed  # noqa: E402
from agentrl.testing import KeyedPolicySampler  # noqa: E402


@pytest.fixture(scope="module")
def backend(qwen_tokenizer: Any) -> LocalBackend:
    return LocalBackend.tiny(qwen_tokenizer, seed=0, device="cpu")


def _requests(vocab: int, count: int, samples: int = 1) -> list[GenRequest]:
    rng = random.Random(0)
    params = SamplingParams(temperature=1.0, max_tokens=10, stop_tokens=(vocab + 1,))
    return [
        GenRequest(
            tuple(rng.randrange(vocab) for _ in range(rng.randrange(5, 60))),
            samples,
            params,
            seed=100 + i,
        )
        for i in range(count)
    ]


def _serve(backend: LocalBackend, requests: list[GenRequest]) -> list[GenResult]:
    engine = backend.engine
    with engine.lock, torch.no_grad():
        return generate(engine, PrefixKVCache(0), requests)


def _outputs(results: list[GenResult]) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    return [(c.tokens, c.logprobs) for r in results for c in r.completions]


def test_the_cpu_engine_uses_rowwise_attention(backend: LocalBackend) -> None:
    assert backend.engine.batch_invariant
    assert backend.engine.base.config._attn_implementation == ROWWISE


def test_a_request_gets_the_same_completion_alone_or_batched(backend: LocalBackend) -> None:
    requests = _requests(backend.engine.vocab_size - 2, 9)
    alone = [out for r in requests for out in _outputs(_serve(backend, [r]))]
    together = _outputs(_serve(backend, requests))
    shuffled = list(range(len(requests)))
    random.Random(1).shuffle(shuffled)
    reordered = _outputs(_serve(backend, [requests[i] for i in shuffled]))
    assert together == alone  # bit-identical logprobs, not just close
    assert [reordered[shuffled.index(i)] for i in range(len(requests))] == alone
    assert len({tokens for tokens, _ in alone}) > 1


def test_small_batches_are_padded_to_the_kernel_threshold(backend: LocalBackend) -> None:
    """Small or ragged products take other kernels (1-3 rows or a ragged block of 4 on AVX2,
    fewer than 16 rows on AVX-512): idle rows round the batch."""
    (single,) = _requests(backend.engine.vocab_size - 2, 1, samples=2)
    others = _requests(backend.engine.vocab_size - 2, 6)
    alone = _outputs(_serve(backend, [single]))
    batched = _outputs(_serve(backend, [single, *others]))[:2]
    assert alone == batched
    assert all(len(tokens) == 10 for tokens, _ in alone)  # idle rows never leak tokens


def _serve_cached(backend: LocalBackend, cache: PrefixKVCache, request: GenRequest) -> GenResult:
    engine = backend.engine
    with engine.lock, torch.no_grad():
        (result,) = generate(engine, cache, [request])
    return result


def test_a_prompt_gets_the_same_completion_whatever_the_cache_holds(
    backend: LocalBackend,
) -> None:
    """Which prefix of a prompt is found cached depends on what ran before it (a game sharing
    the system prompt, a sibling branch sharing the whole first prompt, the trajectory's own
    previous turn, or nothing after an eviction): the prompt is prefilled in chunks cut at
    other places, and the completion must not change by a bit."""
    vocab = backend.engine.vocab_size - 2
    rng = random.Random(3)
    system = tuple(rng.randrange(vocab) for _ in range(70))
    first = system + tuple(rng.randrange(vocab) for _ in range(45))
    other_game = system + tuple(rng.randrange(vocab) for _ in range(30))
    params = SamplingParams(temperature=1.0, max_tokens=12, stop_tokens=(vocab + 1,))

    def request(prompt: tuple[int, ...], seed: int) -> GenRequest:
        return GenRequest(prompt, 1, params, seed=seed)

    def budget() -> PrefixKVCache:
        return PrefixKVCache(100_000)

    fresh = _serve_cached(backend, budget(), request(first, 5))
    shared_system = budget()
    _serve_cached(backend, shared_system, request(other_game, 6))
    after_system = _serve_cached(backend, shared_system, request(first, 5))
    sibling = budget()
    _serve_cached(backend, sibling, request(first, 9))
    after_sibling = _serve_cached(backend, sibling, request(first, 5))
    assert (fresh.reused_tokens, after_system.reused_tokens) == (0, len(system))
    assert after_sibling.reused_tokens == len(first) - 1  # only the last token prefilled
    assert _outputs([after_system]) == _outputs([fresh])  # bit-identical logprobs
    assert _outputs([after_sibling]) == _outputs([fresh])

    own = budget()
    (decoded,) = _serve_cached(backend, own, request(first, 5)).completions
    second = first + decoded.tokens + tuple(rng.randrange(vocab) for _ in range(9))
    continued = _serve_cached(backend, own, request(second, 7))
    from_nothing = _serve_cached(backend, budget(), request(second, 7))
    assert continued.reused_tokens == len(first) + len(decoded.tokens) - 1
    assert from_nothing.reused_tokens == 0
    assert _outputs([continued]) == _outputs([from_nothing])


def test_decoding_row_counts_meet_both_kernel_thresholds() -> None:
    assert [decode_rows(n) for n in (1, 3, 15, 16, 17, 20, 21)] == [16, 16, 16, 16, 20, 20, 24]
    assert all(decode_rows(n) % DECODE_ROW_MULTIPLE == 0 for n in range(1, 100))
    assert all(decode_rows(n) >= max(n, DECODE_MIN_ROWS) for n in range(1, 100))


def test_a_batch_above_the_minimum_rows_is_invariant_too(backend: LocalBackend) -> None:
    """18 live rows decode as 20 rows, shrinking through 16 as rows finish."""
    requests = _requests(backend.engine.vocab_size - 2, 18)
    alone = [out for r in requests[:3] for out in _outputs(_serve(backend, [r]))]
    together = _outputs(_serve(backend, requests))[:3]
    assert together == alone


def test_keyed_seeds_are_stable_and_distinct() -> None:
    key = (42, "update 3", "0:task", 1, 2)
    assert derive_seed(*key) == derive_seed(*key)
    keys = [(42, "update 3", "0:task", b, t) for b in range(8) for t in range(8)]
    seeds = {derive_seed(*k) for k in keys}
    assert len(seeds) == len(keys)
    assert derive_seed(1, 2) != derive_seed(1, "2")  # an int and a string key differ
    assert 0 <= derive_seed(0) < 2**63


def test_keyed_policy_sampler_ignores_arrival_order(qwen_tokenizer: Any) -> None:
    sampler = KeyedPolicySampler(qwen_tokenizer, lambda text, rng: rng.choice("abcdefgh"))
    prompt = qwen_tokenizer.encode("pick one")

    async def ask(seeds: list[int]) -> dict[int, tuple[int, ...]]:
        out = {}
        for seed in seeds:
            (completion,) = await sampler.sample(prompt, 1, SamplingParams(seed=seed))
            out[seed] = completion.tokens
        return out

    forward = asyncio.run(ask(list(range(20))))
    backward = asyncio.run(ask(list(range(19, -1, -1))))
    assert forward == backward
    assert len(set(forward.values())) > 1
    with pytest.raises(ValueError, match=r"SamplingParams\.seed"):
        asyncio.run(sampler.sample(prompt, 1, SamplingParams()))


class _Attention(torch.nn.Module):
    """The attributes transformers' SDPA attention reads from an attention module."""

    is_causal = True

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups


@pytest.mark.parametrize(("heads", "kv_heads", "dim"), [(4, 2, 16), (4, 4, 16), (2, 1, 320)])
def test_one_query_attention_is_the_wrapper_bit_for_bit(
    heads: int, kv_heads: int, dim: int
) -> None:
    """The invariant paths call SDPA directly for one-token queries (the wrapper's per-call
    cost is a third of a call); they must compute exactly what transformers' SDPA attention
    computes, with and without shared key heads, and fall back to it where it takes another
    path (head dims above 256)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from agentrl.backends.local.invariant import one_query_attention

    module = _Attention(heads // kv_heads)
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(1, kv_heads, 97, dim, generator=generator)
    values = torch.randn(1, kv_heads, 97, dim, generator=generator)
    query = torch.randn(1, heads, 1, dim, generator=generator)
    kwargs: dict[str, Any] = {"dropout": 0.0, "scaling": dim**-0.5, "sliding_window": None}
    attend = one_query_attention(module, keys, values, kwargs)
    for end in (1, 2, 31, 97):
        expected, _ = sdpa_attention_forward(
            module, query, keys[:, :, :end], values[:, :, :end], None, **kwargs
        )
        got = attend(query, keys[:, :, :end], values[:, :, :end]).transpose(1, 2)
        assert torch.equal(got, expected), (end, float((got - expected).abs().max()))
    unscaled = one_query_attention(module, keys, values, {"dropout": 0.0, "scaling": 1.0})
    assert not torch.equal(unscaled(query, keys, values), attend(query, keys, values))


def test_invariant_prefill_benchmark_runs_and_finds_the_direct_call_identical() -> None:
    """`benchmarks/invariant_prefill.py` at its smallest: its last line, and the direct call's
    logits, keys and completions bit for bit the wrapper's."""
    import re
    import subprocess
    import sys

    from tests.helpers.paths import BENCHMARKS

    command = [sys.executable, str(BENCHMARKS / "invariant_prefill.py"), "--tokens", "20", "300"]
    done = subprocess.run(
        [*command, "--repeats", "1"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    pattern = (
        r"prefill300_speedup=[\d.]+ prefill1200_speedup=nan sample_speedup=[\d.]+ "
        r"invariant_cost300=[\d.]+ identical=True"
    )
    assert re.fullmatch(pattern, last), last
