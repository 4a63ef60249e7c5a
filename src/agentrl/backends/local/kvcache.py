"""A prefix-keyed store of per-trajectory KV caches with an LRU memory budget.

Each entry holds the keys/values of one token sequence (batch of one). A new prompt reuses
the entry sharing its longest common prefix (found through a radix tree, `prefix_index`, not by
scanning every entry): a multi-turn trajectory's next prompt extends
its previous prompt and completion, so only the tokens added since the last turn are
prefilled. Entries are never modified in place (the model concatenates into new tensors), so
a partial match can be used as a view while the entry stays available to other branches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agentrl.backends.local.model import KV
from agentrl.backends.local.prefix_index import PrefixIndex

__all__ = ["CacheStats", "PrefixKVCache"]


@dataclass
class _Entry:
    tokens: npt.NDArray[np.int64]
    kv: KV
    tick: int


@dataclass
class CacheStats:
    """Counters of one cache (mutable; read them, do not write)."""

    lookups: int = 0
    hits: int = 0
    reused_tokens: int = 0
    evictions: int = 0
    stored_tokens: int = 0
    entries: int = 0


class PrefixKVCache:
    """LRU store of KV caches keyed by their token sequence, bounded by a token budget."""

    def __init__(self, max_tokens: int, *, min_match: int = 1) -> None:
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        self.max_tokens = max_tokens
        self.min_match = min_match
        self._entries: dict[int, _Entry] = {}
        self._stored = 0
        """Tokens held by all entries (kept up to date: summing them is O(entries))."""
        self._index = PrefixIndex()
        """The entries' token sequences: the longest-prefix lookup without a scan."""
        self._next_id = 0
        self._tick = 0
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def stored_tokens(self) -> int:
        """Tokens held by all entries."""
        return self._stored

    def clear(self) -> None:
        """Drop every entry (e.g. after the weights changed)."""
        self._entries.clear()
        self._index.clear()
        self._stored = 0
        self.stats.stored_tokens = 0
        self.stats.entries = 0

    def take(self, prompt: Sequence[int], *, max_length: int) -> tuple[int, KV | None]:
        """Longest reusable prefix of `prompt` (at most `max_length` tokens) and its KV.

        An entry matched over its whole length is removed (the caller's new entry will
        supersede it); a partially matched entry stays and the caller gets a view.
        """
        self.stats.lookups += 1
        if not self._entries or max_length <= 0:
            return 0, None
        found = self._index.best(np.asarray(prompt, dtype=np.int64))
        if found is None:
            return 0, None
        best_id, best_len = found
        usable = min(best_len, max_length)
        if usable < self.min_match:
            return 0, None
        entry = self._entries[best_id]
        if usable == entry.tokens.size:
            self._drop(best_id)
            self._sync_stats()
        else:
            entry.tick = self._bump()
        kv = [(k[:, :, :usable, :], v[:, :, :usable, :]) for k, v in entry.kv]
        self.stats.hits += 1
        self.stats.reused_tokens += usable
        return usable, kv

    def put(self, tokens: Sequence[int], kv: KV) -> None:
        """Store the KV of `tokens` (batch of one), evicting least recently used entries."""
        array = np.asarray(tokens, dtype=np.int64)
        if array.size == 0 or array.size > self.max_tokens:
            return
        keys = kv[0][0]
        if keys.shape[0] != 1 or keys.shape[2] != array.size:
            raise ValueError(f"KV of shape {tuple(keys.shape)} does not match {array.size} tokens")
        self._entries[self._next_id] = _Entry(tokens=array, kv=kv, tick=self._bump())
        self._index.add(self._next_id, array)
        self._stored += array.size
        self._next_id += 1
        self._evict()
        self._sync_stats()

    def _bump(self) -> int:
        self._tick += 1
        return self._tick

    def _evict(self) -> None:
        while self._stored > self.max_tokens and self._entries:
            self._drop(min(self._entries, key=lambda i: self._entries[i].tick))
            self.stats.evictions += 1

    def _drop(self, entry_id: int) -> None:
        entry = self._entries.pop(entry_id)
        self._index.remove(entry_id, entry.tokens)
        self._stored -= entry.tokens.size

    def _sync_stats(self) -> None:
        self.stats.entries = len(self._entries)
        self.stats.stored_tokens = self.stored_tokens
