"""`LocalSampler`: the async `Sampler` of the local backend.

Concurrent `sample()` calls (the K branches of a group, many groups) are queued and served
together: a worker takes what has arrived, runs one batched generation in a thread (so the
event loop keeps running environments), and resolves the callers. Each trajectory's KV
cache is kept between turns in a `PrefixKVCache`; when the weights change (an optimizer
step, a load) the cache is dropped.

Cancellation reaches the thread: when the batch's worker is cancelled (SIGINT / SIGTERM cancel
the command's task, and `asyncio.run` cancels what is left) or every caller of the batch has
gone, the generation stops before its next decoding step, so a stop never waits for a batch
of thousands of tokens to finish.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.local.engine import ModelEngine
from agentrl.backends.local.generation import (
    GenerationCancelled,
    GenRequest,
    GenResult,
    generate,
)
from agentrl.backends.local.kvcache import PrefixKVCache
from agentrl.backends.local.training import check_token_ids
from agentrl.core.types import Completion

__all__ = ["LocalSampler", "SamplerStats"]


@dataclass
class SamplerStats:
    """Token accounting of a sampler since it was created (or `reset_stats`)."""

    requests: int = 0
    batches: int = 0
    prompt_tokens: int = 0
    """Sum of prompt lengths over requests (what a cache-less sampler would prefill)."""
    prefill_tokens: int = 0
    """Prompt tokens actually computed."""
    reused_tokens: int = 0
    """Prompt tokens taken from the KV cache."""
    decode_tokens: int = 0
    """Sampled tokens."""


@dataclass
class _Pending:
    request: GenRequest
    future: asyncio.Future[GenResult]


def _default_gib(engine: ModelEngine, gib: float | None) -> float:
    if gib is not None:
        return gib
    if engine.device.type == "cuda":
        return torch.cuda.get_device_properties(engine.device).total_memory / 4 / 2**30
    return 2.0


class LocalSampler:
    """Samples from a `ModelEngine` with per-trajectory KV-cache reuse and request batching."""

    def __init__(
        self,
        engine: ModelEngine,
        *,
        kv_cache_tokens: int | None = None,
        kv_cache_gib: float | None = None,
        max_batch_rows: int = 64,
        batch_kv_gib: float | None = None,
        batch_window_s: float = 0.002,
        seed: int = 0,
        reuse_kv: bool = True,
    ) -> None:
        """Memory budgets default to 2 GiB each on CPU and a quarter of the GPU each on CUDA:
        `kv_cache_gib` for the keys/values kept between turns, `batch_kv_gib` for one decoding
        batch (rows x (prompt + max_tokens) tokens; larger batches are split)."""
        self.engine = engine
        per_token = engine.kv_bytes_per_token()
        budget = (
            kv_cache_tokens
            if kv_cache_tokens is not None
            else int(_default_gib(engine, kv_cache_gib) * 2**30 // per_token)
        )
        self.cache = PrefixKVCache(budget if reuse_kv else 0)
        self.max_batch_rows = max_batch_rows
        self.max_batch_tokens = int(_default_gib(engine, batch_kv_gib) * 2**30 // per_token)
        self.batch_window_s = batch_window_s
        self._rng = random.Random(seed)
        self._pending: list[_Pending] = []
        self._worker: asyncio.Task[None] | None = None
        self._cache_version = engine.version
        self._stats = SamplerStats()

    @property
    def weights_version(self) -> int:
        """The engine's weights counter now: this sampler always samples the live weights, and
        each completion reports the counter of the weights that made it."""
        return self.engine.version

    @property
    def stats(self) -> SamplerStats:
        """A copy of the counters since creation or the last `reset_stats()`."""
        return replace(self._stats)

    def reset_stats(self) -> None:
        """Zero the counters."""
        self._stats = SamplerStats()

    def clear_cache(self) -> None:
        """Drop every cached KV entry."""
        self.cache.clear()

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` completions of `prompt_tokens` with per-token logprobs."""
        return (await self.sample_detailed(prompt_tokens, num_samples, params)).completions

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        """`Teacher`: None, then the model's logprob of each token given the ones before it
        (one forward pass of the live weights, no gradient, on a worker thread)."""
        values = await self._after_each_prefix(
            tokens, "compute_logprobs", self.engine.sequence_logprobs
        )
        return [None, *(float(v) for v in values)]

    async def top_tokens(self, tokens: Sequence[int]) -> list[int | None]:
        """`LabellingTeacher`: None, then the model's most likely token after each prefix
        (one forward pass of the live weights, no gradient, on a worker thread)."""
        values = await self._after_each_prefix(
            tokens, "top_tokens", self.engine.sequence_top_tokens
        )
        return [None, *(int(v) for v in values)]

    async def _after_each_prefix(
        self, tokens: Sequence[int], method: str, compute: Callable[[list[int]], torch.Tensor]
    ) -> list[float]:
        """`compute`'s answer after each prefix `tokens[:i]`, i >= 1 (one forward pass of the
        engine, on a worker thread); `tokens` refused, naming `method`, when empty or outside
        the vocabulary."""
        ids = [int(t) for t in tokens]
        if not ids:
            raise ValueError(f"{method} needs at least one token")
        check_token_ids(ids, self.engine.vocab_size, f"{method}' input")
        if len(ids) == 1:
            return []
        values: list[float] = (await asyncio.to_thread(compute, ids)).tolist()
        return values

    async def sample_detailed(
        self,
        prompt_tokens: Sequence[int],
        num_samples: int,
        params: SamplingParams,
        *,
        forced: Sequence[Sequence[int]] | None = None,
    ) -> GenResult:
        """Like `sample`, also returning how many prompt tokens were prefilled / reused.

        `forced` (one token sequence per sample) replaces sampling by teacher forcing: each
        completion is exactly its sequence, with logprobs under the model, at the cost a
        sampled one would have had; benchmarks replay scripted episodes this way.
        """
        prompt = tuple(int(t) for t in prompt_tokens)
        if not prompt:
            raise ValueError("prompt_tokens is empty; a prompt needs at least one token")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        bad = [t for t in prompt if not 0 <= t < self.engine.vocab_size]
        if bad:
            raise ValueError(
                f"prompt token ids {bad[:5]} are outside the model vocabulary "
                f"[0, {self.engine.vocab_size}); was it tokenized for another model?"
            )
        seed = params.seed if params.seed is not None else self._rng.getrandbits(63)
        loop = asyncio.get_running_loop()
        fixed = None if forced is None else tuple(tuple(int(t) for t in f) for f in forced)
        request = GenRequest(prompt, num_samples, params, seed, fixed)
        pending = _Pending(request, loop.create_future())
        self._pending.append(pending)
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._worker = loop.create_task(self._drain())
        return await pending.future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.batch_window_s)
            batch: list[_Pending] = []
            rows = tokens = 0
            while self._pending:
                request = self._pending[0].request
                cost = request.num_samples * (len(request.prompt) + request.max_new)
                full = (
                    rows + request.num_samples > self.max_batch_rows
                    or tokens + cost > self.max_batch_tokens
                )
                if batch and full:
                    break
                item = self._pending.pop(0)
                if item.future.done():  # the caller was cancelled
                    continue
                batch.append(item)
                rows += request.num_samples
                tokens += cost
            if not batch:
                continue
            stop = threading.Event()

            def gone(
                _: asyncio.Future[GenResult],
                batch: list[_Pending] = batch,
                stop: threading.Event = stop,
            ) -> None:
                if all(p.future.done() for p in batch):
                    stop.set()  # nobody waits for this batch any more

            for item in batch:
                item.future.add_done_callback(gone)
            try:
                results = await asyncio.to_thread(self._run, [p.request for p in batch], stop)
            except asyncio.CancelledError:
                stop.set()  # the thread stops before its next decoding step
                raise
            except GenerationCancelled:
                continue
            except Exception as exc:  # delivered to every caller of this batch
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc)
                continue
            for item, result in zip(batch, results, strict=True):
                if not item.future.done():
                    item.future.set_result(result)

    def _run(self, requests: list[GenRequest], stop: threading.Event) -> list[GenResult]:
        with self.engine.lock, torch.no_grad():
            if self._cache_version != self.engine.version:
                self.cache.clear()
                self._cache_version = self.engine.version
            results = generate(self.engine, self.cache, requests, stop.is_set)
        stats = self._stats
        stats.requests += len(requests)
        stats.batches += 1
        for request, result in zip(requests, results, strict=True):
            stats.prompt_tokens += len(request.prompt)
            stats.prefill_tokens += result.prefill_tokens
            stats.reused_tokens += result.reused_tokens
            stats.decode_tokens += sum(len(c.tokens) for c in result.completions)
        return results
