"""Samplers without a model, for tests and tutorials: `ScriptedSampler`, `PolicySampler`,
`KeyedPolicySampler`."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeAlias

from agentrl.backends.base import SamplingParams
from agentrl.core.seeds import derive_seed
from agentrl.core.types import (
    Completion,
    CompletionStop,
)

ScriptItem: TypeAlias = "str | Completion | Exception"
"""One scripted reply: text (tokenized, stop token appended, cut at `max_tokens`), a
pre-tokenized `Completion` returned as is, or an exception the sampler raises."""


class TextTokenizer(Protocol):
    """What scripted samplers need from a tokenizer."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Text to token ids."""
        ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str:
        """Token ids to text."""
        ...


@dataclass(frozen=True)
class SampleCall:
    """One request a scripted sampler received."""

    prompt: tuple[int, ...]
    num_samples: int
    params: SamplingParams


def synthetic_logprobs(tokens: Sequence[int], start: int = 0) -> tuple[float, ...]:
    """Deterministic, distinct-looking logprobs (in [-1, -0.01]) for scripted completions."""
    return tuple(-(((t * 31 + (start + i) * 7) % 100) + 1) / 100 for i, t in enumerate(tokens))


class _TextSampler:
    """Shared machinery: text replies to completions, call log, simulated prefix cache."""

    def __init__(self, tokenizer: TextTokenizer, *, prefix_cache: bool = False) -> None:
        self.tokenizer = tokenizer
        self.prefix_cache = prefix_cache
        self.calls: list[SampleCall] = []
        self._cached: list[tuple[int, ...]] = []

    def _prefill(self, prompt: tuple[int, ...]) -> int | None:
        if not self.prefix_cache:
            return None
        best = 0
        for seq in self._cached:
            n = 0
            for a, b in zip(seq, prompt, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return len(prompt) - best

    def _replies(
        self,
        prompt_tokens: Sequence[int],
        num_samples: int,
        params: SamplingParams,
        reply: Callable[[str, int], ScriptItem],
    ) -> list[Completion]:
        """Record the call and complete `reply(prompt_text, k)` for each sample k (the prefill
        is reported once per request)."""
        prompt = tuple(prompt_tokens)
        self.calls.append(SampleCall(prompt, num_samples, params))
        prefill = self._prefill(prompt)
        text = self.tokenizer.decode(prompt, skip_special_tokens=False)
        out = []
        for k in range(num_samples):
            shared = prefill if k == 0 or prefill is None else 0
            out.append(self._complete(reply(text, k), prompt, params, shared))
        return out

    def _complete(
        self, item: ScriptItem, prompt: tuple[int, ...], params: SamplingParams, prefill: int | None
    ) -> Completion:
        if isinstance(item, Exception):
            raise item
        if isinstance(item, Completion):
            completion = item
        else:
            tokens = list(self.tokenizer.encode(item, add_special_tokens=False))
            stop = CompletionStop.STOP
            if params.stop_tokens:
                tokens.append(params.stop_tokens[0])
            if len(tokens) > params.max_tokens:
                tokens, stop = tokens[: params.max_tokens], CompletionStop.LENGTH
            completion = Completion(
                tokens=tuple(tokens),
                logprobs=synthetic_logprobs(tokens, len(prompt)),
                stop_reason=stop,
            )
        if prefill is not None:
            completion = replace(completion, prefill_tokens=prefill)
        self._cached.append(prompt + completion.tokens)
        return completion


class ScriptedSampler(_TextSampler):
    """A `Sampler` that plays one script per branch of ONE group (for tests and tutorials).

    The first request must ask for `len(scripts)` samples (turn 1 of a group): sample i gets
    item 0 of script i. Every later request must extend exactly one branch's last prompt plus
    completion; it gets that branch's next item (an exception item is raised, so a retry gets
    the item after it). When a script runs out, `default` is used (None: an error). Requests
    breaking these rules are recorded in `violations` and raise ValueError. Branches whose
    histories are identical cannot be told apart: give their scripts different replies.
    """

    def __init__(
        self,
        tokenizer: TextTokenizer,
        scripts: Sequence[Sequence[ScriptItem]],
        *,
        default: ScriptItem | None = None,
        prefix_cache: bool = False,
    ) -> None:
        super().__init__(tokenizer, prefix_cache=prefix_cache)
        self.scripts = [list(s) for s in scripts]
        self.default = default
        self.positions = [0] * len(self.scripts)
        self.violations: list[str] = []
        self._ends: list[tuple[int, ...] | None] = [None] * len(self.scripts)

    def _violation(self, message: str) -> ValueError:
        self.violations.append(message)
        return ValueError(message)

    def _next(self, branch: int) -> ScriptItem:
        position = self.positions[branch]
        self.positions[branch] += 1
        if position < len(self.scripts[branch]):
            return self.scripts[branch][position]
        if self.default is None:
            raise self._violation(f"script of branch {branch} ran out after {position} replies")
        return self.default

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """Scripted completions (see the class docstring)."""
        prompt = tuple(prompt_tokens)
        self.calls.append(SampleCall(prompt, num_samples, params))
        prefill = self._prefill(prompt)
        if all(end is None for end in self._ends):
            if num_samples != len(self.scripts):
                raise self._violation(
                    f"first request asked for {num_samples} samples, scripts have "
                    f"{len(self.scripts)} branches"
                )
            branches = list(range(num_samples))
        else:
            matches = [
                b
                for b, end in enumerate(self._ends)
                if end is not None and len(prompt) > len(end) and prompt[: len(end)] == end
            ]
            if num_samples != 1 or not matches:
                raise self._violation(
                    f"request ({len(prompt)} tokens, {num_samples} samples) does not extend "
                    "any branch's last prompt + completion"
                )
            # Branches with identical histories are interchangeable: take the lowest index.
            longest = max(len(self._ends[b] or ()) for b in matches)
            branches = [min(b for b in matches if len(self._ends[b] or ()) == longest)]
        out = []
        for k, branch in enumerate(branches):
            completion = self._complete(
                self._next(branch),
                prompt,
                params,
                prefill if k == 0 else (0 if prefill is not None else None),
            )
            self._ends[branch] = prompt + completion.tokens
            out.append(completion)
        return out


class PolicySampler(_TextSampler):
    """A `Sampler` whose replies come from `policy(prompt_text)` (any number of groups)."""

    def __init__(
        self,
        tokenizer: TextTokenizer,
        policy: Callable[[str], ScriptItem],
        *,
        prefix_cache: bool = False,
    ) -> None:
        super().__init__(tokenizer, prefix_cache=prefix_cache)
        self.policy = policy

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` replies of the policy to the decoded prompt."""
        return self._replies(prompt_tokens, num_samples, params, lambda text, _k: self.policy(text))


class KeyedPolicySampler(_TextSampler):
    """A `Sampler` whose replies come from `policy(prompt_text, rng)`, with `rng` seeded from
    the request's keyed seed (`SamplingParams.seed`) and the sample's index: its draws do not
    depend on the order requests arrive in (a `PolicySampler`'s one generator does)."""

    def __init__(
        self,
        tokenizer: TextTokenizer,
        policy: Callable[[str, random.Random], ScriptItem],
        *,
        prefix_cache: bool = False,
    ) -> None:
        super().__init__(tokenizer, prefix_cache=prefix_cache)
        self.policy = policy

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` replies of the policy; raises `ValueError` without `params.seed`."""
        if params.seed is None:
            raise ValueError(
                "KeyedPolicySampler needs SamplingParams.seed (set RolloutConfig.sampling's "
                "seed: the rollout engine then keys every request)"
            )
        seed = params.seed
        return self._replies(
            prompt_tokens,
            num_samples,
            params,
            lambda text, k: self.policy(text, random.Random(derive_seed(seed, k))),
        )
