"""The local sampler's KV-cache lookup: the radix index (`PrefixIndex`) against a scan of
every entry, same entries and queries, same run.

Entries look like a rollout's: a shared 300-token head (system prompt), then a token that
tells the trajectories apart and 200 more; each query extends one stored sequence by two
tokens (the next turn of that trajectory). For 100, 1 000 and 10 000 entries, the milliseconds
per lookup (min and median of `--repeats` rounds of `--queries` lookups). The scan answers the
same (checked on every query). The last line is

    entries=10000 scan_ms=A index_ms=B speedup=A/B same_answers=true

    python benchmarks/kv_lookup.py [--queries 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import numpy as np

from agentrl.backends.local.prefix_index import PrefixIndex


def scan(stored: dict[int, np.ndarray], query: np.ndarray) -> tuple[int, int] | None:
    """The baseline: compare the query with every entry (the lookup the cache used to do)."""
    best: tuple[int, int] | None = None
    for key, tokens in stored.items():
        n = min(tokens.size, query.size)
        diff = np.flatnonzero(tokens[:n] != query[:n])
        shared = int(diff[0]) if diff.size else n
        if shared and (
            best is None
            or shared > best[1]
            or (shared == best[1] and tokens.size < stored[best[0]].size)
        ):
            best = (key, shared)
    return best


def main() -> None:
    """Time both lookups for three entry counts; print the summary line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    head = np.arange(300, dtype=np.int64)
    same = True
    line = ""
    for count in (100, 1_000, 10_000):
        stored = {
            i: np.concatenate([head, [1000 + i], rng.integers(0, 50, 200)]).astype(np.int64)
            for i in range(count)
        }
        index = PrefixIndex()
        for key, tokens in stored.items():
            index.add(key, tokens)
        queries = [
            np.concatenate([stored[int(k)], [5, 6]]).astype(np.int64)
            for k in rng.integers(0, count, args.queries)
        ]
        times: dict[str, list[float]] = {"scan": [], "index": []}
        lookups = {"scan": partial(scan, stored), "index": index.best}
        for _ in range(args.repeats):
            for name, lookup in lookups.items():
                clock = time.perf_counter()
                answers = [lookup(q) for q in queries]
                times[name].append((time.perf_counter() - clock) / len(queries) * 1000)
                if name == "scan":
                    expected = answers
                else:
                    same = same and answers == expected
        scan_ms, index_ms = statistics.median(times["scan"]), statistics.median(times["index"])
        print(
            f"{count:>6} entries: scan {scan_ms:.3f} ms (min {min(times['scan']):.3f}), index "
            f"{index_ms:.3f} ms (min {min(times['index']):.3f}) per lookup: "
            f"{scan_ms / index_ms:.1f}x",
            flush=True,
        )
        line = (
            f"entries={count} scan_ms={scan_ms:.3f} index_ms={index_ms:.3f} "
            f"speedup={scan_ms / index_ms:.1f} same_answers={str(same).lower()}"
        )
    print(line)


if __name__ == "__main__":
    main()
