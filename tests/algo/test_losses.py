"""The torch losses against a hand-written per-token reference (both clipping branches) and
hand-computed values: CISPO, GSPO's sequence-level ratio, clip-higher, normalisations, TIS and
the KL-to-reference estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentrl.backends.base import (  # noqa: E402
    KLEstimator,
    LossConfig,
    LossName,
    LossNormalisation,
)
from agentrl.losses import kl_estimate, loss_divisor, policy_loss_sum  # noqa: E402


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
        elif loss is LossName.CISPO:
            total += -min(max(r, lo), hi) * a * n
            clipped += int(r < lo or r > hi)
        elif loss is LossName.GSPO:  # one datum: the sequence ratio of all masked tokens
            s = math.exp(
                sum(x - y for x, y, z in zip(new, old, mask, strict=True) if z) / sum(mask)
            )
            total += -min(s * a, min(max(s, lo), hi) * a)
            clipped += int(min(max(s, lo), hi) * a < s * a)
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
    assert float(out.loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert out.tokens == mask.sum()
    if loss in (LossName.CISPO, LossName.GSPO):
        assert out.clipped == clipped
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


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_cispo_clips_the_weight_but_keeps_every_gradient() -> None:
    new = torch.tensor([0.5, -0.5, 0.05], dtype=torch.float64, requires_grad=True)
    old, adv = t(0.0, 0.0, 0.0), t(1.0, -1.0, 2.0)
    out = policy_loss_sum(new, old, adv, t(1, 1, 1), LossName.CISPO, LossConfig(0.8, 1.2))
    # weights: r = 1.6487 -> 1.2, r = 0.6065 -> 0.8, r = 1.0513 stays
    w3 = math.exp(0.05)
    expected = -(1.2 * 1 * 0.5) - (0.8 * -1 * -0.5) - w3 * 2 * 0.05
    assert float(out.loss.detach()) == pytest.approx(expected)
    out.loss.backward()
    np.testing.assert_allclose(new.grad.numpy(), [-1.2, 0.8, -2 * w3])  # -w * A, never 0
    assert out.clipped == 2


def test_gspo_uses_one_ratio_per_sequence_and_clips_whole_sequences() -> None:
    # datum 0: log ratios 0.1, 0.3 -> s = e^0.2 = 1.2214 > 1.2 with A > 0: clipped
    # datum 1: log ratios -0.1, 0.0, 0.1 -> s = 1: inside, gradient -A * s per token
    # datum 2: log ratios -0.4, -0.2 -> s = e^-0.3 = 0.7408 < 0.8 with A < 0: clipped
    old = t(0, 0, 0, 0, 0, 0, 0)
    new = torch.tensor(
        [0.1, 0.3, -0.1, 0.0, 0.1, -0.4, -0.2], dtype=torch.float64, requires_grad=True
    )
    adv = t(1, 1, -1, -1, -1, -2, -2)
    ids = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    out = policy_loss_sum(
        new,
        old,
        adv,
        torch.ones(7, dtype=torch.float64),
        LossName.GSPO,
        LossConfig(),
        sequence_ids=ids,
    )
    expected = 2 * -1.2 + 3 * 1.0 + 2 * -(0.8 * -2)
    assert float(out.loss.detach()) == pytest.approx(expected)
    assert out.ratio == pytest.approx(2 * math.exp(0.2) + 3 * 1.0 + 2 * math.exp(-0.3))
    assert out.clipped == 4 and out.sequences == 3
    out.loss.backward()
    np.testing.assert_allclose(new.grad.numpy(), [0, 0, 1, 1, 1, 0, 0], atol=1e-12)


def test_gspo_on_one_token_sequences_is_ppo() -> None:
    rng = np.random.default_rng(3)
    old, new, adv = rng.normal(-1, 0.2, 20), rng.normal(-1, 0.4, 20), rng.normal(0, 1, 20)
    ids = torch.arange(20)
    args = (torch.tensor(new), torch.tensor(old), torch.tensor(adv), torch.ones(20))
    gspo = policy_loss_sum(*args, LossName.GSPO, LossConfig(), sequence_ids=ids)
    ppo = policy_loss_sum(*args, LossName.PPO, LossConfig())
    assert float(gspo.loss.detach()) == pytest.approx(float(ppo.loss.detach()))
    assert gspo.clipped == ppo.clipped > 0


def test_clip_higher_keeps_the_gradient_of_a_rising_token() -> None:
    new = torch.tensor([math.log(1.25)], dtype=torch.float64, requires_grad=True)
    symmetric = policy_loss_sum(new, t(0), t(1), t(1), LossName.PPO, LossConfig(0.8, 1.2))
    symmetric.loss.backward()
    assert new.grad is not None and float(new.grad) == 0.0 and symmetric.clipped == 1
    new.grad = None
    higher = policy_loss_sum(new, t(0), t(1), t(1), LossName.PPO, LossConfig(0.8, 1.28))
    higher.loss.backward()
    assert float(new.grad) == pytest.approx(-1.25) and higher.clipped == 0


@pytest.mark.parametrize(
    ("normalisation", "constant", "expected"),
    [
        (LossNormalisation.TOKENS, None, -11 / 5),  # (2 * -1 + 3 * -3) / 5 tokens
        (LossNormalisation.SEQUENCE, None, -2.0),  # (mean -1 + mean -3) / 2 datums
        (LossNormalisation.CONSTANT, 10.0, -11 / 10),
    ],
)
def test_normalisations(normalisation, constant, expected) -> None:
    config = LossConfig(normalisation=normalisation, norm_constant=constant)
    logp = t(-1, -1, -1, -1, -1)
    out = policy_loss_sum(
        logp,
        logp,
        t(1, 1, 3, 3, 3),
        t(1, 1, 1, 1, 1),
        LossName.IMPORTANCE_SAMPLING,
        config,
        sequence_ids=torch.tensor([0, 0, 1, 1, 1]),
    )
    divisor = loss_divisor(config, out.tokens, out.sequences)
    assert float(out.loss.detach()) / divisor == pytest.approx(expected)


def test_constant_normalisation_needs_a_constant() -> None:
    with pytest.raises(ValueError, match="norm_constant"):
        LossConfig(normalisation=LossNormalisation.CONSTANT)


def test_truncated_importance_weight() -> None:
    # sampler logprobs 0, trainer -> weights min(e^0.5, 1.5) = 1.5 and e^-0.5; ratio 1
    new = torch.tensor([0.5, -0.5], dtype=torch.float64, requires_grad=True)
    out = policy_loss_sum(new, t(0, 0), t(1, 1), t(1, 1), LossName.PPO, LossConfig(tis_cap=1.5))
    assert float(out.loss.detach()) == pytest.approx(-(1.5 + math.exp(-0.5)))
    assert out.clipped == 0 and out.ratio == pytest.approx(2.0)
    assert out.tis_weight == pytest.approx(1.5 + math.exp(-0.5))
    out.loss.backward()
    np.testing.assert_allclose(new.grad.numpy(), [-1.5, -math.exp(-0.5)])


def test_kl_estimators_by_hand() -> None:
    logp, ref = t(-1.0, -2.0), t(-1.5, -2.0)  # log(ref / pi) = -0.5 and 0
    np.testing.assert_allclose(kl_estimate(logp, ref, KLEstimator.K1).numpy(), [0.5, 0.0])
    k3 = math.exp(-0.5) + 0.5 - 1
    np.testing.assert_allclose(kl_estimate(logp, ref, KLEstimator.K3).numpy(), [k3, 0.0])
    config = LossConfig(kl_coef=0.1, kl_estimator=KLEstimator.K3)
    out = policy_loss_sum(
        logp, logp, t(0, 0), t(1, 1), LossName.IMPORTANCE_SAMPLING, config, ref_logprobs=ref
    )
    assert float(out.loss.detach()) == pytest.approx(0.1 * k3) and out.kl_ref == pytest.approx(k3)
    with pytest.raises(ValueError, match="reference"):
        policy_loss_sum(logp, logp, t(0, 0), t(1, 1), LossName.PPO, config)
