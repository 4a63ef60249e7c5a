"""Losses made safe for stale data: dual clip (a hand-computed example), the KL penalty on
degenerate groups, and the config that turns them on."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from agentrl.algo.advantages import GroupMean, score_groups  # noqa: E402
from agentrl.algo.datums import scored_datums  # noqa: E402
from agentrl.algo.loss_config import LossConfig, LossName  # noqa: E402
from agentrl.algo.losses import policy_loss_sum  # noqa: E402
from agentrl.config import TrainConfig  # noqa: E402
from agentrl.testing import synthetic_group  # noqa: E402

RATIOS = [5.0, 2.0, 5.0, 0.5]
ADVANTAGES = [-1.0, -1.0, 1.0, -1.0]


def _loss(loss: LossName, config: LossConfig) -> tuple[float, list[float], float]:
    old = torch.zeros(4)
    logprobs = torch.tensor([math.log(r) for r in RATIOS], requires_grad=True)
    sums = policy_loss_sum(logprobs, old, torch.tensor(ADVANTAGES), torch.ones(4), loss, config)
    sums.loss.backward()
    assert logprobs.grad is not None
    return float(sums.loss.detach()), [float(g) for g in logprobs.grad], sums.clipped


def test_dual_clip_matches_a_hand_computed_ppo_example() -> None:
    # ppo per token (clip 0.8 / 1.2): max(-rA, -clip(r)A) = 5, 2, -1.2, 0.8; the dual clip at
    # C = 3 caps the first (A < 0, r = 5) at -C * A = 3 and leaves the rest
    plain, plain_grad, plain_clipped = _loss(LossName.PPO, LossConfig())
    dual, dual_grad, dual_clipped = _loss(LossName.PPO, LossConfig(dual_clip=3.0))
    assert plain == pytest.approx(5 + 2 - 1.2 + 0.8)
    assert dual == pytest.approx(3 + 2 - 1.2 + 0.8)
    # d/dlogp of -rA is -rA: 5 and 2 where the ratio branch is taken; 0 where clipped
    assert plain_grad == pytest.approx([5.0, 2.0, 0.0, 0.0])
    assert dual_grad == pytest.approx([0.0, 2.0, 0.0, 0.0])  # no gradient through the cap
    assert (plain_clipped, dual_clipped) == (2.0, 3.0)


def test_dual_clip_caps_importance_sampling_and_leaves_positive_advantages() -> None:
    plain, _, _ = _loss(LossName.IMPORTANCE_SAMPLING, LossConfig())
    dual, grad, _ = _loss(LossName.IMPORTANCE_SAMPLING, LossConfig(dual_clip=3.0))
    assert plain == pytest.approx(5 + 2 - 5 + 0.5)
    assert dual == pytest.approx(3 + 2 - 5 + 0.5)
    assert grad == pytest.approx([0.0, 2.0, -5.0, 0.5])


def test_a_stale_token_with_a_negative_advantage_is_bounded() -> None:
    old = torch.tensor([-40.0])  # the sampler gave it ~e^-40; the trainer now gives it ~1
    logprobs = torch.tensor([-0.01])
    config = LossConfig(dual_clip=3.0)
    for loss in (LossName.PPO, LossName.IMPORTANCE_SAMPLING, LossName.GSPO):
        capped = policy_loss_sum(
            logprobs, old, torch.tensor([-2.0]), torch.ones(1), loss, config
        ).loss
        unbounded = policy_loss_sum(
            logprobs, old, torch.tensor([-2.0]), torch.ones(1), loss, LossConfig()
        ).loss
        assert float(capped.detach()) == pytest.approx(6.0)
        assert float(unbounded.detach()) > 1e12


def test_dual_clip_settings() -> None:
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        LossConfig(dual_clip=1.0)
    local = {"backend": "local"}
    assert TrainConfig(**local).loss_config().dual_clip is None  # the recipe: on-policy, off
    assert TrainConfig(**local, max_steps_off_policy=1).loss_config().dual_clip == 3.0
    off = TrainConfig(**local, max_steps_off_policy=1, dual_clip=0)
    assert off.loss_config().dual_clip is None
    assert TrainConfig(**local, dual_clip=5).loss_config().dual_clip == 5.0
    with pytest.raises(ValueError, match="--dual-clip must be 0"):
        TrainConfig(**local, dual_clip=0.5)
    with pytest.raises(ValueError, match="--dual-clip"):
        TrainConfig(backend="pytrio", dual_clip=3)
    assert TrainConfig(backend="pytrio", max_steps_off_policy=1).loss_config().dual_clip is None


def test_a_kl_penalty_keeps_the_tokens_of_degenerate_groups() -> None:
    scored = score_groups(GroupMean(), [synthetic_group([0.3, 0.3], group_id="same")])
    assert scored_datums(scored) == []  # no advantage: nothing to train without a KL term
    config = TrainConfig(backend="local", kl_coef=0.1).loss_config()
    assert config.needs_every_token and not LossConfig().needs_every_token
    datums = scored_datums(scored, keep_zero_advantage=config.needs_every_token)
    assert len(datums) == 2 and all(float(d.advantages.sum()) == 0.0 for d in datums)
    mask = torch.tensor(datums[0].mask)
    logprobs = torch.tensor(datums[0].logprobs, dtype=torch.float32, requires_grad=True)
    sums = policy_loss_sum(
        logprobs,
        torch.tensor(datums[0].logprobs),
        torch.tensor(datums[0].advantages),
        mask,
        LossName.PPO,
        config,
        ref_logprobs=torch.tensor(datums[0].logprobs) - 0.5,
    )
    assert sums.kl_ref > 0 and float(sums.loss.detach()) > 0
    sums.loss.backward()
    assert logprobs.grad is not None and float(logprobs.grad.abs().sum()) > 0
