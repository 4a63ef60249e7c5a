"""Which policy version sampled each completion: `VersionedSampler`.

A *policy version* is the number of training updates completed when a set of weights was
current (0: the weights a run started from, or resumed at `n`: `n`). The trainer's group
sources sample through a `VersionedSampler`, which tags every completion with the version of
the weights that produced it (`Completion.policy_version`, then `Turn.policy_version`), so the
staleness of every trained token is known, not assumed.

Two kinds of samplers:

- **pinned** (PyTRIO / Tinker sampling clients, the vLLM adapter sampler): a sampler serves
  the weights it was created with. Its completions are tagged with the version given when it
  was installed (`VersionedSampler.install`). A request in flight when new weights are
  installed finishes on the old sampler and keeps the old version.
- **live** (`LiveWeights`: the local sampler): one sampler always serves the trainer's current
  weights, and each completion reports the sampler's own weights counter
  (`Completion.weights_version`). During training that counter moves by exactly one per
  optimizer step, so the completion's version is `installed version + (its counter - the
  counter at install)`: exact even when a generation batch runs after a step the trainer has
  not yet reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from agentrl.backends.base import Sampler, SamplingParams
from agentrl.core.types import Completion

__all__ = ["LiveWeights", "VersionedSampler"]


@runtime_checkable
class LiveWeights(Protocol):
    """A sampler whose weights change under it; it reports a counter of those changes."""

    @property
    def weights_version(self) -> int:
        """The weights counter now (it increases by one per optimizer step)."""
        ...


class VersionedSampler:
    """A `Sampler` over the newest installed sampler that tags each completion with the policy
    version that produced it (module docstring)."""

    def __init__(self, sampler: Sampler, version: int) -> None:
        self._sampler = sampler
        self._version = version
        self._counter: int | None = None
        self.install(sampler, version)

    @property
    def version(self) -> int:
        """The policy version of the installed sampler."""
        return self._version

    def install(self, sampler: Sampler, version: int) -> None:
        """Sample with `sampler` (the weights after `version` updates) from now on; requests
        already sent finish on the sampler they were sent to."""
        if version < 0:
            raise ValueError(f"a policy version is >= 0, got {version}")
        self._sampler, self._version = sampler, version
        self._counter = sampler.weights_version if isinstance(sampler, LiveWeights) else None

    def version_of(self, completion: Completion, version: int, counter: int | None) -> int:
        """The policy version of `completion`, sent when `version` (counter `counter`) was
        installed."""
        if counter is None or completion.weights_version is None:
            return version
        return version + (completion.weights_version - counter)

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """The installed sampler's completions, each tagged with its policy version."""
        sampler, version, counter = self._sampler, self._version, self._counter
        completions = await sampler.sample(prompt_tokens, num_samples, params)
        return [
            replace(c, policy_version=self.version_of(c, version, counter)) for c in completions
        ]
