"""Loss and off-policy settings in the config: defaults are the recipe, remote-only limits
are refused when the config is built (not after the first rollout)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrl.backends.base import KLEstimator, LossName, LossNormalisation
from agentrl.config import StalePolicy, TrainConfig


def test_defaults_are_the_synchronous_recipe() -> None:
    c = TrainConfig()
    assert c.max_steps_off_policy == 0 and c.dynamic_sampling_budget == 0
    assert c.stale_groups is StalePolicy.DROP
    loss = c.loss_config()
    assert loss.normalisation is LossNormalisation.TOKENS
    assert (loss.kl_coef, loss.tis_cap, loss.norm_constant) == (0.0, None, None)


def test_constant_normalisation_defaults_to_the_token_budget_of_an_update() -> None:
    c = TrainConfig(backend="local", normalisation="constant", games_per_batch=2, group_size=4)
    assert c.loss_config().norm_constant == 2 * 4 * c.max_trajectory_tokens
    c = TrainConfig(backend="local", normalisation="constant", norm_constant=100.0)
    assert c.loss_config().norm_constant == 100.0


@pytest.mark.parametrize(
    ("backend", "options", "match"),
    [
        ("pytrio", {"kl_coef": 0.1}, "--kl-coef"),
        ("tinker", {"tis_cap": 2.0}, "--tis-cap"),
        ("pytrio", {"normalisation": "sequence"}, "--normalisation sequence"),
        ("pytrio", {"loss": "gspo"}, "gspo"),
    ],
)
def test_local_only_options_are_refused_for_the_services(backend, options, match) -> None:
    with pytest.raises(ValidationError, match=match):
        TrainConfig(backend=backend, **options)


def test_what_the_services_run_is_accepted() -> None:
    assert TrainConfig(backend="tinker", loss="gspo").loss is LossName.GSPO
    assert TrainConfig(backend="pytrio", loss="cispo", clip_high=1.28).loss is LossName.CISPO
    local = TrainConfig(backend="local", loss="gspo", kl_coef=0.1, kl_estimator="k1")
    assert local.loss_config().kl_estimator is KLEstimator.K1
