"""Checks that any implementation of agentrl's contracts must pass.

`check_env_group` drives a fresh `EnvGroup` through its contract: identical initial state
across branches, result shapes, `None` leaving a branch unchanged, finished branches staying
finished, and an idempotent `close()`. Use it in your own tests::

    report = asyncio.run(check_env_group(lambda: MyEnvGroup(task, 4)))

`ScriptedSampler` (one script of replies per branch) and `PolicySampler` (replies from a
function of the prompt text) are `Sampler`s without a model: they tokenize text replies with a
real tokenizer, append the stop token, cut at `max_tokens`, give deterministic logprobs and can
simulate a prefix cache (reporting `Completion.prefill_tokens`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeAlias

from agentrl.backends.base import SamplingParams
from agentrl.env import EnvGroup
from agentrl.types import Completion, CompletionStop, EnvStep

__all__ = [
    "EnvCheckError",
    "EnvCheckReport",
    "PolicySampler",
    "SampleCall",
    "ScriptItem",
    "ScriptedSampler",
    "TextTokenizer",
    "check_env_group",
    "synthetic_logprobs",
]


class EnvCheckError(AssertionError):
    """An EnvGroup broke its contract."""


@dataclass(frozen=True)
class EnvCheckReport:
    """What the checker exercised."""

    group_size: int
    steps_taken: int
    branches_finished: int
    invalid_actions_tried: int


def _visible(step: EnvStep) -> tuple[object, ...]:
    return (
        step.observation,
        step.score,
        step.done,
        step.won,
        step.admissible_actions,
        step.state_key,
        step.error,
    )


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise EnvCheckError(message)


def _check_shape(steps: Sequence[EnvStep], size: int, where: str) -> None:
    _expect(isinstance(steps, list), f"{where}: expected a list of EnvStep, got {type(steps)}")
    _expect(len(steps) == size, f"{where}: expected {size} steps, got {len(steps)}")
    for i, step in enumerate(steps):
        _expect(isinstance(step, EnvStep), f"{where}: item {i} is {type(step)}, not EnvStep")
        _expect(isinstance(step.observation, str), f"{where}: branch {i} observation not str")
        _expect(
            all(isinstance(a, str) for a in step.admissible_actions),
            f"{where}: branch {i} admissible_actions must be strings",
        )


async def check_env_group(
    make_group: Callable[[], EnvGroup],
    *,
    max_steps: int = 60,
    invalid_action: str = "dance with the ceiling 42",
    seed: int = 0,
) -> EnvCheckReport:
    """Run the EnvGroup contract checks on a group built by `make_group`; raise on a breach.

    Branch 0 plays random admissible actions until it finishes (or `max_steps`), the last
    branch is never given an action (it must stay at its initial state), and the middle
    branches alternate between admissible and invalid actions.
    """
    rng = random.Random(seed)
    group = make_group()
    try:
        size = group.size
        _expect(size >= 1, f"group size must be >= 1, got {size}")
        initial = await group.reset()
        _check_shape(initial, size, "reset()")
        first = _visible(initial[0])
        for i, step in enumerate(initial[1:], start=1):
            _expect(
                _visible(step) == first,
                f"reset(): branch {i} differs from branch 0 "
                f"({step.observation[:80]!r} vs {initial[0].observation[:80]!r})",
            )
        _expect(not initial[0].finished, "reset(): the initial step is already finished")
        _expect(bool(initial[0].admissible_actions), "reset(): no admissible actions")

        try:
            await group.step([None] * (size + 1))
        except ValueError:
            pass
        else:
            raise EnvCheckError("step() accepted a list of actions of the wrong length")

        current = list(initial)
        finished_once = [False] * size
        steps_taken = 0
        invalid_tried = 0
        for turn in range(max_steps):
            actions: list[str | None] = []
            for i, step in enumerate(current):
                if step.finished or (size > 1 and i == size - 1):
                    actions.append(None)
                elif i > 0 and turn % 2 == 1:
                    actions.append(invalid_action)
                    invalid_tried += 1
                else:
                    actions.append(rng.choice(step.admissible_actions))
            if all(a is None for a in actions):
                break
            new = await group.step(actions)
            steps_taken += 1
            _check_shape(new, size, f"step() #{turn}")
            for i, (before, after, action) in enumerate(zip(current, new, actions, strict=True)):
                if action is None:
                    _expect(
                        _visible(after) == _visible(before),
                        f"step() #{turn}: branch {i} got None but changed",
                    )
                if action == invalid_action and not before.finished:
                    _expect(
                        not after.admissible,
                        f"step() #{turn}: branch {i} reported invalid action {action!r} "
                        "as admissible",
                    )
                if before.finished:
                    _expect(after.finished, f"step() #{turn}: finished branch {i} came back")
                if after.finished:
                    finished_once[i] = True
                if after.won:
                    _expect(after.done, f"step() #{turn}: branch {i} won but is not done")
            current = new

        if size > 1:
            _expect(
                _visible(current[-1]) == _visible(initial[-1]),
                "the branch that never got an action is no longer at its initial state",
            )
        for i, step in enumerate(current):
            if finished_once[i]:
                _expect(step.finished, f"branch {i} finished once but is live again")
        done_branches = [i for i, step in enumerate(current) if step.finished]
        if done_branches:
            probe: list[str | None] = [None] * size
            probe[done_branches[0]] = "look"
            try:
                after_probe = await group.step(probe)
            except ValueError:
                pass
            else:
                _expect(
                    after_probe[done_branches[0]].finished,
                    f"an action sent to finished branch {done_branches[0]} revived it",
                )
    finally:
        await group.close()
    await group.close()
    return EnvCheckReport(
        group_size=size,
        steps_taken=steps_taken,
        branches_finished=sum(finished_once),
        invalid_actions_tried=invalid_tried,
    )


# --- scripted samplers ---------------------------------------------------------------------

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
        prompt = tuple(prompt_tokens)
        self.calls.append(SampleCall(prompt, num_samples, params))
        prefill = self._prefill(prompt)
        text = self.tokenizer.decode(prompt, skip_special_tokens=False)
        out = []
        for k in range(num_samples):
            shared = prefill if k == 0 or prefill is None else 0
            out.append(self._complete(self.policy(text), prompt, params, shared))
        return out
