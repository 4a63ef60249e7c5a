"""Reference torch implementations of the policy losses (used by the local backend).

All functions work on flat per-token tensors of the *trained* positions of a batch (or on
padded tensors together with a 0/1 `mask`); `sequence_ids` names the sequence of each
position (a trajectory: one datum, or the segments of one trajectory together).
With behaviour logprobs `b_t` (the sampler's, stored in the datum), `r_t = exp(logp_t - b_t)`,
advantage `A_t`, clip thresholds `lo` / `hi` and `sg` = stop-gradient:

    importance_sampling:  l_t = -r_t * A_t
    ppo:                  l_t = -min(r_t * A_t, clip(r_t, lo, hi) * A_t)
    cispo:                l_t = -sg(clip(r_t, lo, hi)) * A_t * logp_t
    gspo:                 s_i = exp(mean_{t in i} (logp_t - b_t))          (sequence i)
                          s_t = sg(s_i) * exp(logp_t - sg(logp_t))          (value s_i)
                          l_t = -min(s_t * A_t, clip(s_t, lo, hi) * A_t)
    cross_entropy:        l_t = -logp_t                      (supervised warm start)
    dual clip (C):        l_t = min(l_t, -C * A_t) where A_t < 0   (ppo, gspo, importance_sampling)

Options (`LossConfig`):

- `tis_cap = C` (truncated importance sampling): `l_t` is computed with `b_t` replaced by
  `sg(logp_t)` (the trainer's own logprobs) and multiplied by `w_t = min(exp(sg(logp_t) -
  b_t), C)`, the truncated weight of the trainer over the sampler (stale or mismatched
  samplers). With one optimizer step per batch the ratio to `sg(logp_t)` is exactly 1, so the
  clip never binds: this is the TIS-weighted policy gradient, with no trust region.
- `dual_clip = C` (> 1): where `A_t < 0` the per-token loss is capped at `-C * A_t` (the ratio
  capped at C), so a stale token with a negative advantage cannot contribute `-A_t * r_t`
  without bound (up to `e^30` before the exponent clamp); no gradient flows where the cap
  binds. Those tokens count in `clipped`.
- `kl_coef = beta`: `l_t += beta * k_t` with `d_t = ref_t - logp_t` and
  `k1 = -d_t`, `k3 = exp(d_t) - d_t - 1` (the reference policy's logprobs `ref_t`).
- normalisation: the value returned is `sum_t mask_t * c_t * l_t` (a **sum**) with `c_t = 1`,
  or `c_t = 1 / |sequence|` for `sequence`; the caller divides by `loss_divisor(...)` of the
  whole `forward_backward` call (trained tokens, datums, or the constant), so micro-batching
  does not change the gradient; a streamed batch (`--stream-groups`) divides its accumulated
  sums once by the divisor of the whole batch. Metrics are sums too, so they can be
  accumulated.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrl._optional import require
from agentrl.algo.loss_config import KLEstimator, LossConfig, LossName, LossNormalisation

require("torch", "local", "the local training backend")

import torch  # noqa: E402

__all__ = ["LossSums", "kl_estimate", "loss_divisor", "policy_loss_sum"]

_DUAL_CLIPPED = (LossName.PPO, LossName.GSPO, LossName.IMPORTANCE_SAMPLING)
_MAX_EXP = 30.0
"""Exponents are clamped here only to avoid inf * 0 = nan at masked positions."""


@dataclass(frozen=True)
class LossSums:
    """Summed loss (a graph-connected scalar) and summed diagnostics of one micro-batch."""

    loss: torch.Tensor
    """`sum_t mask_t * c_t * l_t` (differentiable)."""
    tokens: float
    """`sum_t mask_t`: trained tokens."""
    ratio: float
    """`sum_t mask_t * r_t` (gspo: the sequence ratio of each token's datum)."""
    clipped: float
    """Tokens whose ratio took the clipped branch (ppo / gspo: no gradient through the ratio
    there; cispo: the weight was clipped)."""
    approx_kl: float
    """`sum_t mask_t * (b_t - logp_t)`: a sampled estimate of KL(sampler || trainer) times
    tokens."""
    kl_ref: float = 0.0
    """`sum_t mask_t * k_t`: the KL-to-reference estimate times tokens (0 without a penalty)."""
    tis_weight: float = 0.0
    """`sum_t mask_t * w_t` (0 without TIS)."""
    sequences: int = 0
    """Datums with at least one trained token."""


def kl_estimate(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator
) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from tokens sampled by the policy."""
    delta = ref_logprobs.float() - logprobs.float()
    if KLEstimator(estimator) is KLEstimator.K1:
        return -delta
    return torch.exp(torch.clamp(delta, max=_MAX_EXP)) - delta - 1.0


def loss_divisor(config: LossConfig, tokens: float, sequences: int) -> float:
    """What the summed loss of a whole `forward_backward` call is divided by."""
    normalisation = LossNormalisation(config.normalisation)
    if normalisation is LossNormalisation.SEQUENCE:
        return float(max(sequences, 1))
    if normalisation is LossNormalisation.CONSTANT:
        assert config.norm_constant is not None  # checked by LossConfig
        return float(config.norm_constant)
    return max(tokens, 1.0)


def policy_loss_sum(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    loss: LossName,
    config: LossConfig,
    *,
    sequence_ids: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
) -> LossSums:
    """Summed per-token loss of `loss` over the positions where `mask` is 1 (see module doc).

    `sequence_ids` (integers >= 0, same shape) say which datum each position belongs to
    (default: all one datum); gspo and `sequence` normalisation use them. `ref_logprobs` are
    required when `config.kl_coef > 0`.
    """
    if not logprobs.shape == old_logprobs.shape == advantages.shape == mask.shape:
        raise ValueError(
            "logprobs, old_logprobs, advantages and mask must have the same shape, got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, "
            f"{tuple(advantages.shape)}, {tuple(mask.shape)}"
        )
    loss = LossName(loss)
    logprobs = logprobs.float()
    mask = mask.float()
    behaviour = old_logprobs.float()
    adv = advantages.float()
    flat_mask = mask.reshape(-1)
    seq = (
        torch.zeros(flat_mask.shape, dtype=torch.long, device=mask.device)
        if sequence_ids is None
        else sequence_ids.reshape(-1).long()
    )
    if seq.shape != flat_mask.shape:
        raise ValueError(f"sequence_ids must have shape {tuple(mask.shape)}")
    count = int(seq.max()) + 1 if seq.numel() else 0
    seq_tokens = torch.zeros(count, device=mask.device).index_add_(0, seq, flat_mask)
    seq_tokens = seq_tokens.reshape(-1)

    tis = torch.ones_like(mask)
    old = behaviour
    if config.tis_cap is not None:
        tis = torch.clamp(
            torch.exp(torch.clamp(logprobs.detach() - behaviour, max=_MAX_EXP)),
            max=config.tis_cap,
        )
        old = logprobs.detach()
    log_ratio = logprobs - old
    ratio = torch.exp(torch.clamp(log_ratio, max=_MAX_EXP))
    lo, hi = config.clip_low, config.clip_high
    clipped = torch.zeros_like(mask)
    shown_ratio = ratio
    if loss is LossName.CROSS_ENTROPY:
        per_token = -logprobs
    elif loss is LossName.IMPORTANCE_SAMPLING:
        per_token = -ratio * adv
    elif loss is LossName.PPO:
        unclipped = ratio * adv
        clipped_obj = torch.clamp(ratio, lo, hi) * adv
        per_token = -torch.minimum(unclipped, clipped_obj)
        clipped = (clipped_obj < unclipped).float()
    elif loss is LossName.CISPO:
        weight = torch.clamp(ratio, lo, hi).detach()
        per_token = -weight * adv * logprobs
        clipped = ((ratio < lo) | (ratio > hi)).float()
    elif loss is LossName.GSPO:
        flat_log_ratio = (log_ratio * mask).reshape(-1)
        seq_log = torch.zeros(count, device=mask.device).index_add(0, seq, flat_log_ratio)
        seq_log = seq_log / torch.clamp(seq_tokens, min=1.0)
        seq_ratio = torch.exp(torch.clamp(seq_log, max=_MAX_EXP)).detach()
        token_ratio = seq_ratio[seq].reshape(mask.shape) * torch.exp(logprobs - logprobs.detach())
        unclipped = token_ratio * adv
        clipped_obj = torch.clamp(token_ratio, lo, hi) * adv
        per_token = -torch.minimum(unclipped, clipped_obj)
        clipped = (clipped_obj < unclipped).float()
        shown_ratio = token_ratio
    else:  # pragma: no cover - exhaustive over LossName
        raise ValueError(f"unknown loss {loss!r}")
    if config.dual_clip is not None and loss in _DUAL_CLIPPED:
        cap = -config.dual_clip * adv
        capped = (adv < 0) & (per_token > cap)
        per_token = torch.where(capped, cap, per_token)
        clipped = torch.maximum(clipped, capped.float())
    if loss is not LossName.CROSS_ENTROPY:
        per_token = per_token * tis
    kl = torch.zeros_like(mask)
    if config.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("LossConfig.kl_coef > 0 needs the reference policy's logprobs")
        kl = kl_estimate(logprobs, ref_logprobs, config.kl_estimator)
        per_token = per_token + config.kl_coef * kl
    weight_t = torch.ones_like(mask)
    if LossNormalisation(config.normalisation) is LossNormalisation.SEQUENCE:
        weight_t = (1.0 / torch.clamp(seq_tokens, min=1.0))[seq].reshape(mask.shape)
    total = (per_token * mask * weight_t).sum()
    with torch.no_grad():
        return LossSums(
            loss=total,
            tokens=float(mask.sum()),
            ratio=float((shown_ratio * mask).sum()),
            clipped=float((clipped * mask).sum()),
            approx_kl=float(((behaviour - logprobs) * mask).sum()),
            kl_ref=float((kl * mask).sum()),
            tis_weight=float((tis * mask).sum()) if config.tis_cap is not None else 0.0,
            sequences=int((seq_tokens > 0).sum()),
        )
