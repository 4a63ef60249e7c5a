"""The torch losses against a hand-written per-token reference, both PPO clipping branches."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentrl.backends.base import LossConfig, LossName  # noqa: E402
from agentrl.losses import policy_loss_sum  # noqa: E402


def reference(new, old, adv, mask, loss: LossName, lo: float, hi: float) -> tuple[float, int]:
    """Plain-Python per-token loss sum and the number of clipped tokens."""
    total, clipped = 0.0, 0
    for n, o, a, m in zip(new, old, adv, mask, strict=True):
        if not m:
            continue
        r = math.exp(n - o)
        if loss is LossName.IMPORTANCE_SAMPLING:
            total += -r * a
        elif loss is LossName.CROSS_ENTROPY:
            total += -n
        else:
            surrogate = min(r * a, min(max(r, lo), hi) * a)
            clipped += int(min(max(r, lo), hi) * a < r * a)
            total += -surrogate
    return total, clipped


@pytest.mark.parametrize("loss", list(LossName))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loss_matches_reference_on_random_inputs(loss: LossName, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 64
    old = -rng.uniform(0.05, 4.0, n)
    new = old + rng.normal(0.0, 0.4, n)  # ratios well outside [0.8, 1.2] on both sides
    adv = rng.normal(0.0, 1.0, n)
    mask = (rng.uniform(size=n) < 0.7).astype(np.float64)
    config = LossConfig(clip_low=0.8, clip_high=1.2)
    out = policy_loss_sum(
        torch.tensor(new), torch.tensor(old), torch.tensor(adv), torch.tensor(mask), loss, config
    )
    expected, clipped = reference(new, old, adv, mask, loss, 0.8, 1.2)
    assert float(out.loss) == pytest.approx(expected, rel=1e-5)
    assert out.tokens == mask.sum()
    if loss is LossName.PPO:
        assert out.clipped == clipped
        ratio = np.exp(new - old)
        upper = (mask > 0) & (adv > 0) & (ratio > 1.2)
        lower = (mask > 0) & (adv < 0) & (ratio < 0.8)
        assert upper.any() and lower.any()  # both clipping branches are exercised
        assert clipped == int(upper.sum() + lower.sum())


def test_ppo_gradient_is_zero_exactly_on_clipped_tokens() -> None:
    old = torch.zeros(4)
    new = torch.tensor([0.5, -0.5, 0.05, 0.5], requires_grad=True)  # ratios 1.65, .61, 1.05, 1.65
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    out = policy_loss_sum(new, old, adv, torch.ones(4), LossName.PPO, LossConfig())
    out.loss.backward()
    grad = new.grad.numpy()
    assert grad[0] == 0.0 and grad[1] == 0.0  # clipped: A>0 & r>1.2, A<0 & r<0.8
    assert grad[2] == pytest.approx(-math.exp(0.05))  # d(-r*A)/dlogp = -r*A
    assert grad[3] == pytest.approx(math.exp(0.5))  # A<0 & r>1.2 is not clipped
    assert out.clipped == 2


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="same shape"):
        policy_loss_sum(
            torch.zeros(3),
            torch.zeros(3),
            torch.zeros(2),
            torch.ones(3),
            LossName.PPO,
            LossConfig(),
        )
