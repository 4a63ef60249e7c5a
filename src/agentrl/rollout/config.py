"""Budgets and sampling of one rollout (`RolloutConfig`), and the error of a sampler that keeps
failing (`SamplerFailure`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from agentrl.backends.base import SamplingParams
from agentrl.core.seeds import derive_seed
from agentrl.core.types import CutReply, StepCounting
from agentrl.rollout.context import ContextPolicy, FullHistory

__all__ = ["RolloutConfig", "SamplerFailure", "labelled_config"]


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and sampling of one rollout (defaults: the published ALFWorld recipe)."""

    group_size: int = 8
    """Branches K per game."""
    max_env_steps: int = 50
    """Steps after which a branch ends with `max_steps` (what counts: `step_counting`)."""
    max_trajectory_tokens: int = 12_000
    """No prompt reaching this many tokens is sent; a completion may fill up to it."""
    max_assistant_tokens: int = 2_048
    """Completion tokens per turn; what a cut reply does: `cut_reply`."""
    step_counting: StepCounting = StepCounting.TURNS
    """`turns`: every assistant reply uses a step (the recipe); `env_calls`: only replies whose
    call reached the environment."""
    cut_reply: CutReply = CutReply.CONTINUE
    """`continue`: a reply cut at `max_assistant_tokens` is an invalid-format turn and the
    episode goes on (the recipe); `end`: it ends the branch (`assistant_token_limit`)."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Temperature, top-p and seed; `max_tokens` is set per turn, empty `stop_tokens` are
    replaced by the renderer's. A `seed` is the base of keyed per-request seeds: request of
    (group id, branch, turn) samples with `derive_seed(seed, group_id, branch, turn)` (the
    group's first request, K samples at once: `(group_id, "first")`), so draws never depend
    on the order requests arrive in. `None` leaves seeding to the sampler."""
    sampler_retries: int = 3
    """Retries of a failed sampling request before the branch records `sampler_error`."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubled for each further retry."""
    sample_timeout: float | None = None
    """Seconds one sampling request may take (None: no limit); a timeout counts as a failure."""
    context: ContextPolicy = field(default_factory=FullHistory)
    """Which earlier turns each prompt holds (`agentrl.rollout.context`): the whole history
    (the recipe) or, e.g., `RecentTurns(5)`, the first messages and the last 5 turns (a cut
    prompt starts a new segment, so trained tokens stay sampled tokens)."""

    def __post_init__(self) -> None:
        for name in (
            "group_size",
            "max_env_steps",
            "max_trajectory_tokens",
            "max_assistant_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.sampler_retries < 0 or not 0 <= self.retry_backoff < math.inf:
            raise ValueError("RolloutConfig.sampler_retries and retry_backoff must be >= 0")
        if self.sample_timeout is not None and not 0 < self.sample_timeout < math.inf:
            raise ValueError(
                f"RolloutConfig.sample_timeout must be a positive number of seconds or None "
                f"(no limit), got {self.sample_timeout}"
            )
        if not isinstance(self.context, ContextPolicy):
            raise TypeError(
                f"RolloutConfig.context must be a ContextPolicy (FullHistory(), "
                f"RecentTurns(n)), got {type(self.context).__name__}"
            )


class SamplerFailure(RuntimeError):
    """Sampling failed after all retries."""


def labelled_config(config: RolloutConfig, label: str) -> RolloutConfig:
    """`config` with its base sampling seed keyed by the rollout call's `label` (unchanged
    without a seed)."""
    if config.sampling.seed is None:
        return config
    keyed = derive_seed(config.sampling.seed, label)
    return replace(config, sampling=replace(config.sampling, seed=keyed))
