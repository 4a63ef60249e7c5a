"""`ReplicaSampler`: one `Sampler` over several (vLLM engines, local models, remote services)
that sends each trajectory to the replica already holding its prefix, spreads new groups over
the replicas and takes a failing replica out.

Routing (prefix affinity, as the cache-aware routers of vLLM's production stack and SGLang do).
Each replica remembers the prompts it was sent (bounded, least recently used first out). A
request goes to the live replica that was sent the longest earlier prompt that is an exact
prefix of this one; with no such prompt it goes to the least-loaded live replica. The rollout
engine's requests make this exact: a group's first turn is one request for K samples, and every
later turn of a branch extends the previous prompt, so all K branches and every later turn of a
group land where the group's first prompt went, where that replica's prefix cache holds them.

Only a *whole* earlier prompt counts as a match, not a partial overlap: every group of an
environment shares its system prompt and tool list, so following the longest partial match
would pile every new group onto the replica that served the first one; each replica caches
that shared head after its first group anyway. Prompts are indexed by hashes of their
`block_tokens`-aligned blocks plus the exact tail, so a match is found in one pass over the
prompt and is exact (a hash collision could only misroute, never change a result); the block
size is a speed knob, not a semantic one.

Load: a request no replica holds a prefix of (a new group) goes to the live replica with the
fewest samples in flight (a K-sample request weighs K), then the fewest requests placed on it
this way so far, then the lowest index: groups arriving together (all in flight at once) or one
after another (none in flight) are dealt out in turn, not by the luck of arrival order. All
calls must come from one event loop.

Failure: a request that raises on a replica (or times out after `timeout`, or returns a wrong
number of completions) takes the replica out (`ReplicaStats.error` says why; after
`readmit_after` seconds it gets one request again and is back when that succeeds; `restore` puts
it back at once) and is sent once more, to the best other live replica. If that fails too, or
none is left, `ReplicaFailure` (a `RuntimeError`) names the replicas and their errors; the
rollout engine retries it like any sampler error and then records `sampler_error`. Exceptions of
`request_errors` (default `ValueError`, `TypeError`: a bad request, e.g. a prompt longer than
the model's context, which would fail on every replica) are raised as they are, without taking
the replica out. Cancelling a request (a rollout `sample_timeout`) never counts as a failure.

Results: a replica samples with the request's own `SamplingParams.seed` (the rollout keys one
per group, branch and turn), so with seeded, batch-invariant replicas such as `LocalSampler`
routing changes which machine samples, not what is sampled.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from agentrl.backends.base import Sampler, SamplingParams, Teacher
from agentrl.core.types import Completion

__all__ = [
    "ReplicaFailure",
    "ReplicaSampler",
    "ReplicaStats",
    "ReplicaTeacher",
    "SamplingTeacher",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_ROOT = hash(("agentrl.replicas", 0))
"""The hash of the empty prefix (the start of every block chain)."""


@runtime_checkable
class SamplingTeacher(Sampler, Teacher, Protocol):
    """A sampler that also scores tokens (`LocalSampler`, `VllmSampler`, `RemoteSampler`)."""


class ReplicaFailure(RuntimeError):
    """No replica could serve a request: each one tried failed, or none is live. The message
    names the replicas and their errors; the rollout records it as `sampler_error`."""

    def __init__(self, message: str, errors: Sequence[tuple[int, str]]) -> None:
        super().__init__(message)
        self.errors = tuple(errors)
        """`(replica index, error)` of each replica that is out, in index order."""


@dataclass(frozen=True)
class ReplicaStats:
    """What one replica of a `ReplicaSampler` has served since it was built."""

    index: int
    live: bool
    requests: int = 0
    """Requests sent to it (`sample` and `compute_logprobs`), retries included."""
    samples: int = 0
    """Completions asked of it (a `compute_logprobs` call counts one)."""
    in_flight: int = 0
    """Samples of the requests it is serving now."""
    affinity: int = 0
    """Requests sent to it because it had been sent a prefix of their prompt."""
    placed: int = 0
    """Requests placed on it by load: no live replica had been sent a prefix of their prompt
    (a new group's first turn, or a prompt whose prefix was forgotten)."""
    retries: int = 0
    """Requests it took over from a replica that failed on them."""
    failures: int = 0
    """Requests that failed on it (the first one took it out)."""
    error: str | None = None
    """Why it was taken out (None: live)."""


def _chain(tokens: tuple[int, ...], block: int) -> list[int]:
    """`chain[i]`: the hash of the first `i` full blocks of `tokens` (`chain[0]`: empty)."""
    chain = [_ROOT]
    for start in range(0, len(tokens) - block + 1, block):
        chain.append(hash((chain[-1], tokens[start : start + block])))
    return chain


class _Memory:
    """The prompts one replica was sent: block-chain hash of a prompt's full blocks -> the
    tails (under one block) of the prompts with those blocks, least recently used first."""

    def __init__(self, block: int, capacity: int) -> None:
        self.block = block
        self.capacity = capacity
        self._ends: OrderedDict[int, set[tuple[int, ...]]] = OrderedDict()

    def add(self, tokens: tuple[int, ...], chain: Sequence[int]) -> None:
        """Remember the prompt `tokens` (with its `_chain`)."""
        full = len(tokens) // self.block
        key = chain[full]
        self._ends.setdefault(key, set()).add(tokens[full * self.block :])
        self._ends.move_to_end(key)
        while len(self._ends) > self.capacity:
            self._ends.popitem(last=False)

    def longest(self, tokens: tuple[int, ...], chain: Sequence[int]) -> tuple[int, int | None]:
        """`(length, key)` of the longest remembered prompt that is a prefix of `tokens`
        (`(0, None)`: none)."""
        best, best_key = 0, None
        for full, key in enumerate(chain):
            tails = self._ends.get(key)
            if not tails:
                continue
            start = full * self.block
            for tail in tails:
                length = start + len(tail)
                if length > best and tokens[start:length] == tail:
                    best, best_key = length, key
        return best, best_key

    def touch(self, key: int) -> None:
        """Mark the prompts under `key` (from `longest`) as the most recently used."""
        if key in self._ends:
            self._ends.move_to_end(key)

    def clear(self) -> None:
        """Forget every prompt."""
        self._ends.clear()


@dataclass
class _State:
    """Mutable counters of one replica (`ReplicaStats` is their snapshot)."""

    requests: int = 0
    samples: int = 0
    in_flight: int = 0
    affinity: int = 0
    placed: int = 0
    retries: int = 0
    failures: int = 0
    error: str | None = None
    out_since: float = 0.0
    """`time.monotonic()` when it was taken out."""


class ReplicaSampler:
    """A `Sampler` over several replicas: prefix-affinity routing, least-loaded placement of
    new groups, failing replicas taken out (the module docstring has the rules)."""

    def __init__(
        self,
        replicas: Sequence[Sampler],
        *,
        block_tokens: int = 64,
        max_prefixes: int = 4096,
        timeout: float | None = None,
        request_errors: tuple[type[Exception], ...] = (ValueError, TypeError),
        readmit_after: float | None = 60.0,
    ) -> None:
        """`block_tokens`: hashing granularity of the prefix index; `max_prefixes`: prompts
        remembered per replica (the least recently used are forgotten first); `timeout`:
        seconds a replica may take for one request before it counts as failed (None: no
        limit); `request_errors`: exception types that are the request's fault (raised as
        they are, the replica stays live); `readmit_after`: seconds after which a replica that
        was taken out is tried again with one request, and put back when it succeeds (None:
        only `restore` puts it back)."""
        if not replicas:
            raise ValueError("ReplicaSampler needs at least one replica")
        for index, replica in enumerate(replicas):
            if not isinstance(replica, Sampler):
                raise TypeError(f"replica {index} ({type(replica).__name__}) is not a Sampler")
        if block_tokens < 1 or max_prefixes < 1:
            raise ValueError("ReplicaSampler.block_tokens and max_prefixes must be >= 1")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"ReplicaSampler.timeout must be > 0 seconds or None, got {timeout}")
        self._replicas = tuple(replicas)
        self._block = block_tokens
        self._memory = [_Memory(block_tokens, max_prefixes) for _ in self._replicas]
        self._states = [_State() for _ in self._replicas]
        if readmit_after is not None and readmit_after < 0:
            raise ValueError(
                f"ReplicaSampler.readmit_after must be >= 0 or None, got {readmit_after}"
            )
        self._timeout = timeout
        self._request_errors = request_errors
        self._readmit_after = readmit_after
        self._closed = False

    @property
    def replicas(self) -> tuple[Sampler, ...]:
        """The replicas, in index order."""
        return self._replicas

    @property
    def live(self) -> tuple[int, ...]:
        """Indexes of the replicas still in service."""
        return tuple(i for i, s in enumerate(self._states) if s.error is None)

    @property
    def stats(self) -> tuple[ReplicaStats, ...]:
        """A snapshot of every replica's counters, in index order."""
        return tuple(
            ReplicaStats(
                index=i,
                live=s.error is None,
                requests=s.requests,
                samples=s.samples,
                in_flight=s.in_flight,
                affinity=s.affinity,
                placed=s.placed,
                retries=s.retries,
                failures=s.failures,
                error=s.error,
            )
            for i, s in enumerate(self._states)
        )

    def restore(self, index: int) -> None:
        """Put replica `index` back in service (e.g. after its engine was restarted); it
        starts with no remembered prompts."""
        self._states[index].error = None
        self._memory[index].clear()

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` completions of `prompt_tokens` from the replica the prompt is routed
        to (retried once on another if that replica fails)."""

        async def run(index: int, tokens: tuple[int, ...]) -> list[Completion]:
            completions = await self._replicas[index].sample(tokens, num_samples, params)
            if len(completions) != num_samples:
                raise RuntimeError(f"asked for {num_samples} completions, got {len(completions)}")
            return list(completions)

        return await self._route(prompt_tokens, num_samples, run)

    async def close(self) -> None:
        """Close every replica that has a `close()` (idempotent); a replica's error is raised
        after the others were closed."""
        if self._closed:
            return
        self._closed = True
        results = await asyncio.gather(*(_close(r) for r in self._replicas), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            log.warning("closing a replica failed: %s: %s", type(error).__name__, error)
        if errors:
            raise errors[0]

    def _choose(
        self, tokens: tuple[int, ...], chain: Sequence[int], tried: set[int]
    ) -> tuple[int, bool] | None:
        """`(replica, whether it holds a prefix of the prompt)` for a request, or None when no
        untried replica is live: the longest remembered prefix first, then the fewest samples
        in flight, the fewest requests placed by load, the lowest index."""
        best: tuple[int, int, int, int] | None = None
        best_key: int | None = None
        for index, state in enumerate(self._states):
            if index in tried or not self._eligible(state):
                continue
            matched, key = self._memory[index].longest(tokens, chain)
            rank = (-matched, state.in_flight, state.placed, index)
            if best is None or rank < best:
                best, best_key = rank, key
        if best is None:
            return None
        index = best[3]
        if best_key is not None:
            self._memory[index].touch(best_key)
        return index, best_key is not None

    def _eligible(self, state: _State) -> bool:
        """Live, or out for `readmit_after` seconds already (it gets one request to prove
        itself: put back if it succeeds, out for another period if it fails)."""
        if state.error is None:
            return True
        if self._readmit_after is None:
            return False
        return time.monotonic() - state.out_since >= self._readmit_after

    async def _route(
        self,
        prompt_tokens: Sequence[int],
        weight: int,
        run: Callable[[int, tuple[int, ...]], Awaitable[T]],
    ) -> T:
        """`run(replica, tokens)` on the chosen replica, once more on another if it fails."""
        if self._closed:
            raise RuntimeError("ReplicaSampler is closed")
        tokens = tuple(int(t) for t in prompt_tokens)
        chain = _chain(tokens, self._block)
        tried: set[int] = set()
        failed: list[tuple[int, str]] = []
        for attempt in range(2):
            choice = self._choose(tokens, chain, tried)
            if choice is None:
                break
            index, affine = choice
            tried.add(index)
            state = self._states[index]
            state.requests += 1
            state.samples += weight
            state.retries += attempt
            if affine:
                state.affinity += 1
            else:
                state.placed += 1
            if tokens:
                self._memory[index].add(tokens, chain)
            state.in_flight += weight
            try:
                request = run(index, tokens)
                if self._timeout is None:
                    result = await request
                else:
                    result = await asyncio.wait_for(request, self._timeout)
                if state.error is not None:  # a readmitted replica proved itself
                    log.warning("replica %d is back in service", index)
                    state.error = None
                return result
            except self._request_errors:
                raise
            except Exception as exc:
                reason = _describe(exc, self._timeout)
                failed.append((index, reason))
                self._take_out(index, reason)
            finally:
                state.in_flight -= weight
        raise self._failure(failed)

    def _take_out(self, index: int, reason: str) -> None:
        state = self._states[index]
        state.failures += 1
        state.out_since = time.monotonic()
        if state.error is None:
            state.error = reason
            self._memory[index].clear()
            live = len(self.live)
            log.warning("replica %d taken out (%d live): %s", index, live, reason)

    def _failure(self, failed: Sequence[tuple[int, str]]) -> ReplicaFailure:
        """The error of a request no replica served: its own errors, then why the replicas
        left untried are out."""
        parts = [f"replica {i} failed: {reason}" for i, reason in failed]
        tried = {i for i, _ in failed}
        out = [
            (i, s.error)
            for i, s in enumerate(self._states)
            if s.error is not None and i not in tried
        ]
        parts += [f"replica {i} is out ({error})" for i, error in out]
        if self.live:
            head = f"the request failed on {len(failed)} replicas"
        else:
            head = f"no live replica is left of {len(self._replicas)}"
        errors = sorted([*failed, *out])
        return ReplicaFailure(f"{head}: " + "; ".join(parts), errors)


class ReplicaTeacher(ReplicaSampler):
    """A `ReplicaSampler` whose replicas are also teachers: `compute_logprobs` is routed with
    the same prefix affinity and failure rules as `sample`."""

    def __init__(
        self,
        replicas: Sequence[SamplingTeacher],
        *,
        block_tokens: int = 64,
        max_prefixes: int = 4096,
        timeout: float | None = None,
        request_errors: tuple[type[Exception], ...] = (ValueError, TypeError),
        readmit_after: float | None = 60.0,
    ) -> None:
        """Like `ReplicaSampler`; every replica must be a `Teacher`."""
        for index, replica in enumerate(replicas):
            if not isinstance(replica, Teacher):
                raise TypeError(
                    f"replica {index} ({type(replica).__name__}) is not a Teacher (it has no "
                    "compute_logprobs); use ReplicaSampler for samplers that only sample"
                )
        super().__init__(
            replicas,
            block_tokens=block_tokens,
            max_prefixes=max_prefixes,
            timeout=timeout,
            request_errors=request_errors,
        )
        self._teachers = tuple(replicas)

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        """`Teacher`: the routed replica's `compute_logprobs(tokens)`."""

        async def run(index: int, routed: tuple[int, ...]) -> list[float | None]:
            return await self._teachers[index].compute_logprobs(routed)

        return await self._route(tokens, 1, run)


async def _close(replica: object) -> None:
    """`replica.close()`, awaited when it is a coroutine (nothing without one)."""
    close = getattr(replica, "close", None)
    if close is None:
        return
    result = close()
    if inspect.isawaitable(result):
        await result


def _describe(exc: BaseException, timeout: float | None) -> str:
    """`Type: message` of a replica's error (a timeout says how long it waited)."""
    if isinstance(exc, TimeoutError) and not str(exc) and timeout is not None:
        return f"TimeoutError: no answer within {timeout:g} s"
    return f"{type(exc).__name__}: {exc}"
