"""Loss settings: which policy loss (`LossName`), its normalisation, KL estimator and
hyper-parameters (`LossConfig`). The reference math is `agentrl.algo.losses`; backends take
these settings in `forward_backward` (`agentrl.backends.base` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["KLEstimator", "LossConfig", "LossName", "LossNormalisation"]


class LossName(StrEnum):
    """Policy-gradient losses (reference math: `agentrl.algo.losses`)."""

    PPO = "ppo"
    """Token-level clipped surrogate; an asymmetric clip (`clip_high` further from 1 than
    `clip_low`, "clip-higher" as in DAPO) is just a `LossConfig` setting."""
    IMPORTANCE_SAMPLING = "importance_sampling"
    CROSS_ENTROPY = "cross_entropy"
    """Supervised negative log-likelihood of the masked (assistant) tokens; for warm starts.
    `logprobs` and `advantages` are ignored."""
    CISPO = "cispo"
    """Clipped importance-sampling weight (no gradient through it) times the REINFORCE term
    (MiniMax-M1): every token keeps a gradient, however far its ratio has moved."""
    GSPO = "gspo"
    """Sequence-level ratio (geometric mean of the token ratios of a datum) and clipping
    (Qwen GSPO, token form so per-turn advantages still work)."""


class LossNormalisation(StrEnum):
    """What the summed per-token loss of one `forward_backward` call is divided by."""

    TOKENS = "tokens"
    """The number of trained tokens of the whole call (per token over the batch; on the
    services: whatever the service does, see docs/backends.md)."""
    SEQUENCE = "sequence"
    """Mean over each sequence's tokens, then mean over sequences (GRPO as published); a
    sequence is a trajectory, its segments together (`Datum.sequence`)."""
    CONSTANT = "constant"
    """A fixed constant (`LossConfig.norm_constant`), as in Dr. GRPO: no length bias."""


class KLEstimator(StrEnum):
    """Per-token estimator of KL(policy || reference) from sampled tokens."""

    K1 = "k1"
    """`logp - ref_logp` (unbiased, high variance, can be negative)."""
    K3 = "k3"
    """`exp(ref - logp) - (ref - logp) - 1` (unbiased, never negative; Schulman's k3)."""


@dataclass(frozen=True)
class LossConfig:
    """Loss hyper-parameters: ratio clip thresholds, normalisation, KL penalty, TIS cap,
    dual clip."""

    clip_low: float = 0.8
    clip_high: float = 1.2
    normalisation: LossNormalisation = LossNormalisation.TOKENS
    norm_constant: float | None = None
    """The divisor of `LossNormalisation.CONSTANT` (required there, unused otherwise)."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy (local backend: the base model with
    the LoRA adapter disabled); 0 disables it."""
    kl_estimator: KLEstimator = KLEstimator.K3
    tis_cap: float | None = None
    """Truncated importance sampling: weight each token by `min(pi_trainer / pi_sampler, cap)`
    and take the loss's ratio against the trainer's own (detached) logprobs; None disables.
    With one optimizer step per batch (agentrl's updates) that ratio is exactly 1, so the clip
    never binds: the loss is then the TIS-weighted policy gradient, with no trust region."""
    dual_clip: float | None = None
    """Dual-clip PPO (Ye et al. 2020, verl's `clip_ratio_c`): for tokens with a negative
    advantage the ratio is capped at this value (> 1) in ppo, gspo and importance_sampling, so
    a stale token whose probability rose far above the sampler's contributes at most
    `-C * A`; None disables."""

    @property
    def needs_every_token(self) -> bool:
        """True when zero-advantage trajectories still carry a gradient (a KL penalty)."""
        return self.kl_coef > 0

    def __post_init__(self) -> None:
        if not 0 < self.clip_low <= 1 <= self.clip_high:
            raise ValueError(
                f"LossConfig needs 0 < clip_low <= 1 <= clip_high, got "
                f"{self.clip_low} / {self.clip_high}"
            )
        normalisation = LossNormalisation(self.normalisation)
        if normalisation is LossNormalisation.CONSTANT and not (self.norm_constant or 0) > 0:
            raise ValueError(
                f"LossConfig.normalisation='constant' needs norm_constant > 0, got "
                f"{self.norm_constant}"
            )
        if self.kl_coef < 0:
            raise ValueError(f"LossConfig.kl_coef must be >= 0, got {self.kl_coef}")
        if self.tis_cap is not None and not self.tis_cap > 0:
            raise ValueError(f"LossConfig.tis_cap must be > 0 or None, got {self.tis_cap}")
        if self.dual_clip is not None and not self.dual_clip > 1:
            raise ValueError(f"LossConfig.dual_clip must be > 1 or None, got {self.dual_clip}")
