"""Keyed random seeds: every draw of a run is named by what it is for, never by arrival order.

`derive_seed(seed, *key)` hashes a base seed and a key (strings and integers, e.g. the label of
a rollout, a group id, a branch and a turn) into a 63-bit seed. Concurrent requests may reach
a sampler in any order (threads, batching windows, a loaded machine, a slow environment);
seeds derived from what a request *is* make the run independent of that order.
"""

from __future__ import annotations

import hashlib

__all__ = ["derive_seed"]


def derive_seed(seed: int, *key: int | str) -> int:
    """A 63-bit seed that depends only on `seed` and `key` (stable across Python runs)."""
    parts = [str(int(seed)), *(f"{type(k).__name__}:{k}" for k in key)]
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1
