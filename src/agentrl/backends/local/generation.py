"""Batched token generation with per-token logprobs and prefix KV-cache reuse.

One call serves several requests (each: a prompt and `num_samples`). Each request is
prefilled once, from the longest cached prefix of its prompt; its samples then decode as
rows of one left-padded batch together with the rows of the other requests. When a row
stops, the keys/values of `prompt + completion[:-1]` are stored in the prefix cache, so the
next turn of that trajectory prefills only the tokens the renderer appended.

Logprobs are those of the unmodified model distribution (temperature 1, no top-p): the same
quantity training recomputes, so on-policy PPO ratios start at exactly 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentrl.backends.base import SamplingParams
from agentrl.backends.local.engine import ModelEngine
from agentrl.backends.local.invariant import decode_rows
from agentrl.backends.local.kvcache import PrefixKVCache
from agentrl.backends.local.model import KV, cache_select_rows, kv_from_cache, kv_to_cache
from agentrl.core.types import Completion, CompletionStop

__all__ = ["GenRequest", "GenResult", "generate"]


@dataclass(frozen=True)
class GenRequest:
    """One sampling request."""

    prompt: tuple[int, ...]
    num_samples: int
    params: SamplingParams
    seed: int
    """Seed of this request's random generator (from params.seed, or drawn by the sampler)."""
    forced: tuple[tuple[int, ...], ...] | None = None
    """Teacher forcing: sample k emits `forced[k]` instead of sampling (logprobs computed)."""

    @property
    def max_new(self) -> int:
        """Most tokens this request can generate."""
        if self.forced is not None:
            return max(len(f) for f in self.forced)
        return self.params.max_tokens


@dataclass(frozen=True)
class GenResult:
    """Completions of one request and what it cost."""

    completions: list[Completion]
    prefill_tokens: int
    """Prompt tokens computed for this request (the rest came from the KV cache)."""
    reused_tokens: int


@dataclass
class _Row:
    request: int
    pad: int
    stop: frozenset[int]
    max_tokens: int
    tokens: list[int]
    logprobs: list[float]
    forced: tuple[int, ...] | None = None
    idle: bool = False
    """A row kept only to round the batch's row count (`invariant.decode_rows`): samples nothing."""


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    drop = cumulative - sorted_probs >= top_p  # keeps at least the most likely token
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs)


def _sample(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else inverse-CDF sampling (fast on CPU)."""
    if params.temperature == 0:
        return logits.argmax(dim=-1)
    probs = _top_p_filter(torch.softmax(logits / params.temperature, dim=-1), params.top_p)
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=gen, device=probs.device) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True)[:, 0]
    return index.clamp_(max=probs.shape[-1] - 1)


def _prefill(
    engine: ModelEngine, cache: PrefixKVCache, prompt: tuple[int, ...]
) -> tuple[torch.Tensor, KV, int]:
    reused, kv = cache.take(prompt, max_length=len(prompt) - 1)
    suffix = prompt[reused:]
    model_cache = kv_to_cache(kv, reserve=decode_rows(len(suffix)))
    logits, prefilled = engine.prefill(suffix, reused, model_cache)
    return logits, prefilled, reused


def _left_pad(kvs: Sequence[tuple[KV, int]], width: int) -> KV:
    layers: KV = []
    for layer in range(len(kvs[0][0])):
        keys, values = [], []
        for kv, repeat in kvs:
            k, v = kv[layer]
            pad = width - k.shape[2]
            if pad:
                k = torch.nn.functional.pad(k, (0, 0, pad, 0))
                v = torch.nn.functional.pad(v, (0, 0, pad, 0))
            keys.append(k.expand(repeat, -1, -1, -1))
            values.append(v.expand(repeat, -1, -1, -1))
        layers.append((torch.cat(keys), torch.cat(values)))
    return layers


def _add_idle_rows(
    rows: list[_Row], first_logits: list[torch.Tensor], prefilled: list[tuple[KV, int]]
) -> None:
    """Pad the batch with idle copies of its first row to `decode_rows` rows."""
    missing = decode_rows(len(rows)) - len(rows)
    if missing <= 0:
        return
    first = rows[0]
    for _ in range(missing):
        rows.append(_Row(first.request, first.pad, first.stop, 0, [], [], None, idle=True))
        first_logits.append(first_logits[0])
    prefilled.append((prefilled[0][0], missing))


def _pad_keep(keep: list[int], active: list[int], rows: list[_Row]) -> list[int]:
    """Batch positions to keep: the live rows, plus finished rows turned idle up to
    `decode_rows` rows (in batch order), so every step has a batch-invariant row count."""
    want = decode_rows(len(keep))
    if len(keep) >= want:
        return keep
    live = set(keep)
    extra = [pos for pos in range(len(active)) if pos not in live][: want - len(keep)]
    for pos in extra:
        rows[active[pos]].idle = True
    return sorted([*keep, *extra])


class GenerationCancelled(RuntimeError):
    """A batch's generation was stopped before it finished (its callers were cancelled)."""


def _request_rows(
    rows: Sequence[_Row], active: Sequence[int], device: torch.device
) -> list[tuple[int, list[int], torch.Tensor]]:
    """(request index, its live rows' batch positions, the same on `device`) for every request
    with a live row, in request order: rebuilt only when the batch's rows change, so a decode
    step makes no per-request index scan or host-to-device copy (on CUDA, a sync each)."""
    positions: dict[int, list[int]] = {}
    for pos, row_id in enumerate(active):
        row = rows[row_id]
        if not row.idle:
            positions.setdefault(row.request, []).append(pos)
    return [
        (index, sel, torch.tensor(sel, device=device)) for index, sel in sorted(positions.items())
    ]


def generate(
    engine: ModelEngine,
    cache: PrefixKVCache,
    requests: Sequence[GenRequest],
    cancelled: Callable[[], bool] | None = None,
) -> list[GenResult]:
    """Serve `requests` in one batch (call with `engine.lock` held and grad disabled).

    `cancelled` is asked before every decoding step; when it answers True the batch stops
    with `GenerationCancelled` (within one step: a signal does not wait for the batch)."""
    device = engine.device
    gens = [torch.Generator(device=device).manual_seed(r.seed) for r in requests]
    rows: list[_Row] = []
    first_logits: list[torch.Tensor] = []
    prefilled: list[tuple[KV, int]] = []
    prefill_counts: list[int] = []
    reused_counts: list[int] = []
    lengths = [len(r.prompt) for r in requests]
    width = max(lengths)
    for index, request in enumerate(requests):
        if cancelled is not None and cancelled():
            raise GenerationCancelled("the batch's callers were cancelled")
        if request.forced is not None and (
            len(request.forced) != request.num_samples or not all(request.forced)
        ):
            raise ValueError("forced completions: one non-empty token sequence per sample")
        if len(request.prompt) + request.max_new > engine.max_positions:
            raise ValueError(
                f"prompt of {len(request.prompt)} tokens + max_tokens "
                f"{request.max_new} exceeds the model's {engine.max_positions} positions"
            )
        logits, kv, reused = _prefill(engine, cache, request.prompt)
        prefill_counts.append(len(request.prompt) - reused)
        reused_counts.append(reused)
        prefilled.append((kv, request.num_samples))
        stop = frozenset(request.params.stop_tokens or engine.default_stop_tokens)
        for k in range(request.num_samples):
            forced = request.forced[k] if request.forced is not None else None
            limit = len(forced) if forced is not None else request.max_new
            rows.append(_Row(index, width - lengths[index], stop, limit, [], [], forced))
            first_logits.append(logits)
    _add_idle_rows(rows, first_logits, prefilled)
    longest = max(r.max_new for r in requests)
    model_cache = kv_to_cache(_left_pad(prefilled, width), reserve=longest)
    del prefilled
    logits = torch.stack(first_logits)
    pads = torch.tensor([row.pad for row in rows], device=device)
    active = list(range(len(rows)))  # row ids, in batch order
    length = width  # cached positions per batch row, padding included
    groups = _request_rows(rows, active, device)
    while True:
        if cancelled is not None and cancelled():
            raise GenerationCancelled("the batch's callers were cancelled")
        # idle rows are fed token 0: their outputs are discarded and rows do not mix
        next_tokens = torch.zeros(len(active), dtype=torch.long, device=device)
        for index, sel, idx in groups:
            request = requests[index]
            if request.forced is not None:
                chosen = [rows[active[i]] for i in sel]
                teacher = [row.forced[len(row.tokens)] for row in chosen if row.forced]
                next_tokens[idx] = torch.tensor(teacher, device=device)
            else:
                next_tokens[idx] = _sample(logits[idx], request.params, gens[index])
        token_logprobs = torch.log_softmax(logits, dim=-1).gather(-1, next_tokens[:, None])[:, 0]
        tokens_list = next_tokens.tolist()
        logprob_list = token_logprobs.tolist()
        keep: list[int] = []
        finished = False
        for pos, row_id in enumerate(active):
            row = rows[row_id]
            if row.idle:
                continue
            row.tokens.append(tokens_list[pos])
            row.logprobs.append(logprob_list[pos])
            stopped = row.forced is None and tokens_list[pos] in row.stop
            if stopped or len(row.tokens) >= row.max_tokens:
                finished = True
                request = requests[row.request]
                row_kv = [
                    (k[pos : pos + 1, :, row.pad :].clone(), v[pos : pos + 1, :, row.pad :].clone())
                    for k, v in kv_from_cache(model_cache)
                ]
                cache.put(request.prompt + tuple(row.tokens[:-1]), row_kv)
            else:
                keep.append(pos)
        if not keep:
            break
        keep = _pad_keep(keep, active, rows)
        if len(keep) < len(active):
            sel_t = torch.tensor(keep, device=device)
            cache_select_rows(model_cache, sel_t)
            next_tokens = next_tokens[sel_t]
            pads = pads[sel_t]
            active = [active[p] for p in keep]
        if finished:  # rows left the batch or turned idle: the requests' rows moved
            groups = _request_rows(rows, active, device)
        positions = (length - pads)[:, None]
        mask = (torch.arange(length + 1, device=device)[None] >= pads[:, None]).long()
        logits = engine.step(next_tokens[:, None], positions, model_cache, mask)
        length += 1
    results: list[GenResult] = []
    for index, _request in enumerate(requests):
        own = [row for row in rows if row.request == index and row.tokens]
        completions = [
            Completion(
                tokens=tuple(row.tokens),
                logprobs=tuple(row.logprobs),
                stop_reason=CompletionStop.STOP
                if row.tokens[-1] in row.stop
                else CompletionStop.LENGTH,
                # The shared prefill is reported once per request (the other samples: 0).
                prefill_tokens=prefill_counts[index] if k == 0 else 0,
                weights_version=engine.version,  # the lock is held: these weights made it
            )
            for k, row in enumerate(own)
        ]
        results.append(GenResult(completions, prefill_counts[index], reused_counts[index]))
    return results
