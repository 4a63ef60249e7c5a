"""Reference torch implementations of the policy losses (used by the local backend).

All functions work on flat per-token tensors of the *trained* positions of a batch (or on
padded tensors together with a 0/1 `mask`). With `r_t = exp(logp_t - old_logp_t)` and
advantage `A_t`:

    importance_sampling:  l_t = -r_t * A_t
    ppo:                  l_t = -min(r_t * A_t, clip(r_t, clip_low, clip_high) * A_t)
    cross_entropy:        l_t = -logp_t                      (supervised warm start)

The value returned is `sum_t mask_t * l_t` (a **sum**); the caller divides by the
normaliser it chose (the local backend: the number of trained tokens of the whole
`forward_backward` call, see docs/backends.md), so micro-batching does not change the
gradient. Metrics are sums too, so they can be accumulated over micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrl._optional import require
from agentrl.backends.base import LossConfig, LossName

require("torch", "local", "the local training backend")

import torch  # noqa: E402

__all__ = ["LossSums", "policy_loss_sum"]


@dataclass(frozen=True)
class LossSums:
    """Summed loss (a graph-connected scalar) and summed diagnostics of one micro-batch."""

    loss: torch.Tensor
    """`sum_t mask_t * l_t` (differentiable)."""
    tokens: float
    """`sum_t mask_t`: trained tokens."""
    ratio: float
    """`sum_t mask_t * r_t`."""
    clipped: float
    """Tokens whose PPO term took the clipped branch (the gradient through r_t is 0 there)."""
    approx_kl: float
    """`sum_t mask_t * (old_logp_t - logp_t)`: a sampled estimate of KL(old || new) times tokens."""


def policy_loss_sum(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    loss: LossName,
    config: LossConfig,
) -> LossSums:
    """Summed per-token loss of `loss` over the positions where `mask` is 1 (see module doc)."""
    if not logprobs.shape == old_logprobs.shape == advantages.shape == mask.shape:
        raise ValueError(
            "logprobs, old_logprobs, advantages and mask must have the same shape, got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, "
            f"{tuple(advantages.shape)}, {tuple(mask.shape)}"
        )
    logprobs = logprobs.float()
    mask = mask.float()
    log_ratio = logprobs - old_logprobs.float()
    # Clamp the exponent only to avoid inf * 0 = nan at masked positions.
    ratio = torch.exp(torch.clamp(log_ratio, max=30.0))
    adv = advantages.float()
    clipped = torch.zeros_like(mask)
    if loss is LossName.CROSS_ENTROPY:
        per_token = -logprobs
    elif loss is LossName.IMPORTANCE_SAMPLING:
        per_token = -ratio * adv
    elif loss is LossName.PPO:
        unclipped = ratio * adv
        clipped_obj = torch.clamp(ratio, config.clip_low, config.clip_high) * adv
        per_token = -torch.minimum(unclipped, clipped_obj)
        clipped = (clipped_obj < unclipped).float()
    else:  # pragma: no cover - exhaustive over LossName
        raise ValueError(f"unknown loss {loss!r}")
    total = (per_token * mask).sum()
    with torch.no_grad():
        return LossSums(
            loss=total,
            tokens=float(mask.sum()),
            ratio=float((ratio * mask).sum()),
            clipped=float((clipped * mask).sum()),
            approx_kl=float((-log_ratio * mask).sum()),
        )
