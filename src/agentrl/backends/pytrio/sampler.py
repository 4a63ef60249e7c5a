"""`RemoteSampler`: the `Sampler` over a pytrio / tinker sampling client (see `pytrio.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentrl.backends.base import SamplingParams
from agentrl.backends.pytrio.convert import (
    RemoteLimits,
    completion_from_sequence,
    to_sdk_sampling_params,
)
from agentrl.backends.pytrio.sdk import PyTrioSdk
from agentrl.core.types import Completion

__all__ = ["RemoteSampler", "check_in_flight"]


class RemoteSampler:
    """`Sampler` over an SDK sampling client, with a bound on requests in flight."""

    def __init__(
        self,
        client: Any,
        *,
        sdk: PyTrioSdk | None = None,
        max_in_flight: int = 64,
        limits: RemoteLimits | None = None,
        service: Any = None,
    ) -> None:
        check_in_flight(max_in_flight)
        self.client = client
        self.service = service
        """The service client this sampler owns (closed by `close`), if any."""
        self.sdk = sdk or PyTrioSdk()
        self.limits = limits or RemoteLimits()
        self.max_in_flight = max_in_flight
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.prompt_tokens = 0
        """Prompt tokens sent (each request counts its prompt once)."""

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.max_in_flight), loop
        return self._semaphore

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` completions with per-token logprobs."""
        prompt = [int(t) for t in prompt_tokens]
        if not prompt:
            raise ValueError("prompt_tokens is empty")
        limit = self.limits.max_sample_len
        if limit is not None and len(prompt) + params.max_tokens > limit:
            raise ValueError(
                f"prompt of {len(prompt)} tokens + max_tokens {params.max_tokens} exceeds the "
                f"service's sampling limit of {limit} tokens"
            )
        types = self.sdk.types
        model_input = types.ModelInput.from_ints(prompt)
        sdk_params = to_sdk_sampling_params(types, params)
        async with self._gate():
            response = await self.sdk.sample(self.client, model_input, num_samples, sdk_params)
        self.prompt_tokens += len(prompt)
        prefill = _billed_prefill(response, len(prompt))
        completions = [
            completion_from_sequence(seq, prefill if k == 0 else 0)
            for k, seq in enumerate(response.sequences)
        ]
        if len(completions) != num_samples:
            raise ValueError(f"asked the service for {num_samples} samples, got {len(completions)}")
        return completions

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        """`Teacher`: the service's prompt-aligned logprobs of `tokens` (the first None; None
        also where the service scored none), within the in-flight bound."""
        logprobs = await self._prompt_rows(tokens, "compute_logprobs", self.sdk.compute_logprobs)
        return [None if v is None else float(v) for v in logprobs]

    async def top_tokens(self, tokens: Sequence[int]) -> list[int | None]:
        """`LabellingTeacher`: the service's most likely token after each prefix of `tokens`
        (prompt-aligned, the first None; None also where the service gave none), from one
        prefill with `topk_prompt_logprobs=1`, within the in-flight bound."""
        rows = await self._prompt_rows(tokens, "top_tokens", self.sdk.top_prompt_tokens)
        return [int(row[0][0]) if row else None for row in rows]

    async def _prompt_rows(
        self,
        tokens: Sequence[int],
        method: str,
        ask: Callable[[Any, Any], Awaitable[Sequence[Any]]],
    ) -> list[Any]:
        """`ask`'s prompt-aligned rows for `tokens` (one per token), within the in-flight
        bound; `tokens` refused, naming `method`, when empty or over the sampling limit."""
        prompt = [int(t) for t in tokens]
        if not prompt:
            raise ValueError(f"{method} needs at least one token")
        limit = self.limits.max_sample_len
        if limit is not None and len(prompt) + 1 > limit:
            raise ValueError(
                f"{len(prompt)} tokens to score exceed the service's sampling limit of {limit}"
            )
        model_input = self.sdk.types.ModelInput.from_ints(prompt)
        async with self._gate():
            rows = list(await ask(self.client, model_input))
        self.prompt_tokens += len(prompt)
        if len(rows) != len(prompt):
            raise ValueError(f"the service scored {len(rows)} of {len(prompt)} tokens")
        return rows

    async def close(self) -> None:
        """Finish the session of the service client this sampler owns (if it owns one)."""
        if self.service is not None:
            await self.sdk.close(self.service)
            self.service = None


def check_in_flight(max_in_flight: int) -> None:
    """Raise ValueError unless at least one request may be in flight."""
    if max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")


def _billed_prefill(response: Any, prompt_length: int) -> int:
    """Prompt tokens the service computed for one request (shared by its samples)."""
    hits = getattr(response, "prompt_cache_hit_tokens", None)  # tinker
    if isinstance(hits, int):
        return max(prompt_length - hits, 0)
    billed = getattr(response, "input_tokens", None)  # pytrio usage
    return billed if isinstance(billed, int) and billed > 0 else prompt_length
