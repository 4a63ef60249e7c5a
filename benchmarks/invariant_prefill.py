"""The CPU sampler's cache-invariant prefill: its per-query SDPA call made directly vs through
transformers' wrapper, and both against the plain chunked prefill.

A batch-invariant prefill (`agentrl.backends.local.invariant`) lets each query of a chunk
attend alone over its causal keys, one SDPA call per token and layer, the very call a decoding
step makes for that token. The calls are tiny, so their fixed cost dominates: this script
times, at the CPU preset's model shape (hidden 64, 4 layers, 4 query and 2 key heads of 16;
`--hidden`/`--layers` change it), in one process and interleaved:

1. a prefill of N tokens from an empty cache (N = 20, 300, 1,200 by default): plain
   (chunked SDPA, not invariant), invariant through the wrapper (`wrapped_attention`, the
   previous code) and invariant with the direct call (`one_query_attention`, the current);
2. sampling: 8 completions of 24 tokens from a 300-token prompt, wrapper vs direct.

It checks that the two invariant variants give bit-identical logits, keys and completions (the
direct call is the same op on the same tensors), and reports min/median seconds over
`--repeats` and the ratios. The last line:

    prefill300_speedup=X prefill1200_speedup=Y sample_speedup=Z invariant_cost300=C identical=True

(speedups: the wrapper's median over the direct call's; invariant_cost300: the direct
invariant prefill of 300 tokens over the plain one).

    PYTHONPATH=src python benchmarks/invariant_prefill.py
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.local import LocalBackend, invariant
from agentrl.backends.local.model import kv_to_cache


@contextmanager
def wrapper_calls() -> Iterator[None]:
    """The previous code path: every one-query attention through transformers' wrapper."""
    direct = invariant.one_query_attention
    invariant.one_query_attention = lambda module, key, value, kwargs: (  # type: ignore[assignment]
        invariant.wrapped_attention(module, kwargs)
    )
    try:
        yield
    finally:
        invariant.one_query_attention = direct  # type: ignore[assignment]


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def summary(name: str, seconds: list[float]) -> str:
    return f"{name:34s} min {min(seconds):.4f} s  median {statistics.median(seconds):.4f} s"


def prefill_rows(backend: LocalBackend, count: int, repeats: int) -> tuple[dict[str, float], bool]:
    """Median seconds of the plain, wrapper and direct prefill of `count` tokens, and whether
    the two invariant ones agree bit for bit (logits and keys)."""
    engine = backend.engine
    tokens = [random.Random(count).randrange(5, 200) for _ in range(count)]
    times: dict[str, list[float]] = {"plain": [], "wrapper": [], "direct": []}
    outputs: dict[str, Any] = {}
    for _ in range(repeats):
        for name in times:
            engine.batch_invariant = name != "plain"
            calls = wrapper_calls() if name == "wrapper" else nullcontext()
            with torch.no_grad(), calls:
                seconds, out = timed(lambda: engine.prefill(tokens, 0, kv_to_cache(None)))
            times[name].append(seconds)
            outputs[name] = out
    engine.batch_invariant = True
    (w_logits, w_kv), (d_logits, d_kv) = outputs["wrapper"], outputs["direct"]
    same = torch.equal(w_logits, d_logits) and all(
        torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(w_kv, d_kv, strict=True)
    )
    for name, runs in times.items():
        print(summary(f"prefill {count} tokens, {name}", runs))
    return {name: statistics.median(runs) for name, runs in times.items()}, same


def sampling(backend: LocalBackend, repeats: int) -> tuple[float, float, bool]:
    """Median seconds of 8 completions of 24 tokens from a 300-token prompt, the cache
    cleared before each, wrapper vs direct; and whether the completions agree."""
    rng = random.Random(1)
    prompt = [rng.randrange(5, 200) for _ in range(300)]
    params = SamplingParams(max_tokens=24, temperature=1.0, seed=3)

    async def once() -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
        sampler = await backend.sampler()
        sampler.clear_cache()
        result = await sampler.sample_detailed(prompt, 8, params)
        return [(tuple(c.tokens), tuple(c.logprobs)) for c in result.completions]

    times: dict[str, list[float]] = {"wrapper": [], "direct": []}
    outputs: dict[str, Any] = {}
    for _ in range(repeats):
        with wrapper_calls():
            seconds, outputs["wrapper"] = timed(lambda: asyncio.run(once()))
        times["wrapper"].append(seconds)
        seconds, outputs["direct"] = timed(lambda: asyncio.run(once()))
        times["direct"].append(seconds)
    for name, runs in times.items():
        print(summary(f"sample 8 x 24 from 300, {name}", runs))
    same = bool(outputs["wrapper"] == outputs["direct"])
    return statistics.median(times["wrapper"]), statistics.median(times["direct"]), same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[20, 300, 1200])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shape = {
        "hidden_size": args.hidden,
        "intermediate_size": 3 * args.hidden,
        "num_hidden_layers": args.layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": args.hidden // 4,
    }
    backend = LocalBackend.tiny(
        None, seed=0, device="cpu", full_finetune=True, model_overrides=shape
    )
    print(f"model {shape}, {args.threads} torch thread(s), {args.repeats} repeats")
    speedups: dict[int, float] = {}
    identical = True
    cost300 = float("nan")
    for count in args.tokens:
        medians, same = prefill_rows(backend, count, args.repeats)
        speedups[count] = medians["wrapper"] / medians["direct"]
        identical &= same
        print(f"prefill {count}: wrapper / direct = {speedups[count]:.2f}x, identical {same}")
        if count == 300:
            cost300 = medians["direct"] / medians["plain"]
    wrapper, direct, same = sampling(backend, args.repeats)
    identical &= same
    print(f"sampling: wrapper / direct = {wrapper / direct:.2f}x, identical {same}")
    print(
        f"prefill300_speedup={speedups.get(300, float('nan')):.2f} "
        f"prefill1200_speedup={speedups.get(1200, float('nan')):.2f} "
        f"sample_speedup={wrapper / direct:.2f} invariant_cost300={cost300:.2f} "
        f"identical={identical}"
    )


if __name__ == "__main__":
    main()
