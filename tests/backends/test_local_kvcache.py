"""PrefixKVCache: longest common prefix, partial matches stay, LRU eviction by token budget;
its radix index answers exactly what a scan of every entry would."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

import random  # noqa: E402

import numpy as np  # noqa: E402

from agentrl.backends.local.kvcache import PrefixKVCache  # noqa: E402
from agentrl.backends.local.prefix_index import PrefixIndex  # noqa: E402
from agentrl.backends.local.training import micro_batches  # noqa: E402


def kv_for(tokens: list[int], layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A fake KV whose values encode the token ids (so views can be checked)."""
    t = torch.tensor(tokens, dtype=torch.float32).view(1, 1, -1, 1)
    return [(t.clone(), -t.clone()) for _ in range(layers)]


def test_longest_prefix_and_full_match_consumes() -> None:
    cache = PrefixKVCache(max_tokens=100)
    cache.put([1, 2, 3], kv_for([1, 2, 3]))
    cache.put([1, 2, 3, 4, 5], kv_for([1, 2, 3, 4, 5]))
    reused, kv = cache.take([1, 2, 3, 4, 5, 6, 7], max_length=6)
    assert reused == 5
    assert kv is not None and kv[0][0].flatten().tolist() == [1, 2, 3, 4, 5]
    assert len(cache) == 1  # the fully used entry is superseded by the caller's new one


def test_partial_match_is_a_view_and_stays() -> None:
    cache = PrefixKVCache(max_tokens=100)
    cache.put([1, 2, 3, 4], kv_for([1, 2, 3, 4]))
    reused, kv = cache.take([1, 2, 9], max_length=2)
    assert reused == 2 and kv is not None
    assert kv[1][1].flatten().tolist() == [-1, -2]
    assert len(cache) == 1
    assert cache.take([7, 8], max_length=1) == (0, None)


def test_lru_eviction_by_token_budget() -> None:
    cache = PrefixKVCache(max_tokens=10)
    cache.put([1, 1, 1, 1], kv_for([1, 1, 1, 1]))
    cache.put([2, 2, 2, 2], kv_for([2, 2, 2, 2]))
    cache.take([1, 1, 5], max_length=2)  # touches entry 1
    cache.put([3, 3, 3, 3], kv_for([3, 3, 3, 3]))  # 12 > 10: evict least recently used (2s)
    assert cache.stored_tokens == 8
    assert cache.take([2, 2, 2], max_length=2) == (0, None)
    assert cache.take([1, 1, 1, 1, 9], max_length=4)[0] == 4
    assert cache.stats.evictions == 1


def test_zero_budget_stores_nothing() -> None:
    cache = PrefixKVCache(max_tokens=0)
    cache.put([1, 2], kv_for([1, 2]))
    assert len(cache) == 0


def test_micro_batches_respect_the_padded_token_budget() -> None:
    assert micro_batches([3, 3, 3, 3], 6) == [[0, 1], [2, 3]]
    assert micro_batches([2, 8, 2], 8) == [[0, 2], [1]]  # like lengths share a batch
    assert micro_batches([10], 4) == [[0]]
    assert micro_batches([1, 2, 3], 100) == [[0, 1, 2]]
    assert micro_batches([9, 1, 9, 1], 4) == [[1, 3], [0], [2]]  # no short row padded to 9


def scan_best(stored: dict[int, list[int]], query: list[int]) -> tuple[int, int] | None:
    """The reference: every stored sequence compared with the query, in id order."""
    best: tuple[int, int] | None = None
    for key in sorted(stored):
        tokens = stored[key]
        shared = 0
        while shared < min(len(tokens), len(query)) and tokens[shared] == query[shared]:
            shared += 1
        if shared == 0:
            continue
        if (
            best is None
            or shared > best[1]
            or (shared == best[1] and len(tokens) < len(stored[best[0]]))
        ):
            best = (key, shared)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_the_radix_index_answers_what_a_scan_would(seed: int) -> None:
    rng = random.Random(seed)
    index, stored = PrefixIndex(), {}
    prefixes = [[rng.randrange(3) for _ in range(rng.randrange(1, 6))] for _ in range(4)]

    def sequence() -> list[int]:  # shared heads, short alphabet: many splits and ties
        head = rng.choice(prefixes)
        return head + [rng.randrange(3) for _ in range(rng.randrange(0, 6))]

    for step in range(400):
        action = rng.random()
        if action < 0.45 or not stored:
            tokens = sequence()
            index.add(step, np.asarray(tokens, dtype=np.int64))
            stored[step] = tokens
        elif action < 0.7:
            key = rng.choice(sorted(stored))
            index.remove(key, np.asarray(stored.pop(key), dtype=np.int64))
        else:
            query = sequence()
            assert index.best(np.asarray(query, dtype=np.int64)) == scan_best(stored, query)
        if step % 97 == 0:
            for key, tokens in stored.items():  # every sequence finds itself (or a tie)
                found = index.best(np.asarray(tokens, dtype=np.int64))
                assert found == scan_best(stored, tokens) and found is not None
                assert found[1] == len(tokens) or key not in stored
    index.clear()
    assert index.best(np.asarray([0, 1], dtype=np.int64)) is None


def test_many_entries_are_found_without_a_scan() -> None:
    cache = PrefixKVCache(max_tokens=10**9)
    head = list(range(50))
    for i in range(3000):
        tokens = [*head, 1000 + i, 7, 7]
        cache.put(tokens, kv_for(tokens, layers=1))
    reused, kv = cache.take([*head, 1000 + 1234, 7, 7, 9], max_length=100)
    assert reused == 53 and kv is not None
    assert kv[0][0].flatten().tolist()[-3:] == [1000 + 1234, 7, 7]
    assert len(cache) == 2999
