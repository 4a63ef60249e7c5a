"""Play recorded episodes again, reply for reply, under another rollout config.

A `RecordingSampler` wraps any sampler and keeps each request's completions under the
request's keyed seed (the rollout engine derives it from the config's sampling seed, the
group, the branch and the turn: `agentrl.rollout.turn.turn_params`). A `ReplaySampler` answers
a request with the completions recorded under its seed. Replaying the same tasks with the same
sampling seed but, say, another context policy (`RecentTurns`) therefore plays every episode
action for action as recorded (the environments being deterministic), only the prompts
change: the way to turn demonstrations an expert played with the whole history in view into
the windowed prompts a model will act from (`agentrl.recipes.alfworld_scratch`). A request
that was never recorded (an episode that goes further than its recording did) raises a
`KeyError` naming the seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentrl.backends.base import Sampler, SamplingParams
from agentrl.core.types import Completion

__all__ = ["RecordingSampler", "ReplaySampler"]


def _seed(params: SamplingParams, who: str) -> int:
    if params.seed is None:
        raise ValueError(
            f"{who} needs keyed requests: set RolloutConfig.sampling's seed (the rollout engine "
            "then derives each request's seed from it, the group, the branch and the turn)"
        )
    return params.seed


class RecordingSampler:
    """`inner`'s completions, each request's kept in `replies` under its keyed seed."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        self.replies: dict[int, tuple[Completion, ...]] = {}

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`inner`'s completions (recorded; a request without a keyed seed is refused)."""
        seed = _seed(params, "RecordingSampler")
        completions = await self.inner.sample(prompt_tokens, num_samples, params)
        self.replies[seed] = tuple(completions)
        return completions


class ReplaySampler:
    """The completions recorded under each request's keyed seed (`RecordingSampler.replies`)."""

    def __init__(self, replies: Mapping[int, Sequence[Completion]]) -> None:
        self.replies = replies

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """The recorded completions; `KeyError` when none were recorded under the seed,
        `ValueError` when a different number were."""
        seed = _seed(params, "ReplaySampler")
        if seed not in self.replies:
            raise KeyError(
                f"no completion was recorded for the request keyed {seed}: replay the recorded "
                "tasks with the recording's sampling seed (an episode cannot go further than "
                "its recording)"
            )
        completions = list(self.replies[seed])
        if len(completions) != num_samples:
            raise ValueError(
                f"the request keyed {seed} asks for {num_samples} completions; "
                f"{len(completions)} were recorded"
            )
        return completions
