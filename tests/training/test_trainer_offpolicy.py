"""Off-policy pipelining and dynamic sampling through the real trainer and tiny local backend:
no datum older than k updates is trained; k = 0 runs nothing ahead."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.backends.base import LossConfig, LossName, SamplingParams
from agentrl.datums import Datum
from agentrl.types import Completion
from tests.helpers.trainer_helpers import PolicyDrivenBackend, tiny_backend, toy_config

STEP = 0.01


class TaggedSampler:
    """Samples with the policy, writing the weights version into every logprob."""

    def __init__(self, inner: Any, version: int) -> None:
        self.inner, self.version = inner, version

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        out = await self.inner.sample(prompt_tokens, num_samples, params)
        tag = -STEP * (self.version + 1)
        return [dataclasses.replace(c, logprobs=(tag,) * len(c.tokens)) for c in out]


class VersionCheckingBackend(PolicyDrivenBackend):
    """Records, for every trained datum, how many optimizer steps old its sampler was."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.steps = 0
        self.staleness: list[list[int]] = []

    async def sampler(self) -> Any:
        return TaggedSampler(self._sampler, self.steps)

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> Any:
        versions = [round(-float(d.logprobs[d.mask > 0].max()) / STEP) - 1 for d in datums]
        assert all(len(set(np.round(d.logprobs[d.mask > 0], 6))) == 1 for d in datums), (
            "every turn of a datum comes from one sampler"
        )
        self.staleness.append([self.steps - v for v in versions])
        return await super().forward_backward(datums, loss, config)

    async def optim_step(self, adam: Any) -> Any:
        out = await super().optim_step(adam)
        self.steps += 1
        return out


def _trainer(config: Any, tokenizer: Any, backend: Any) -> Any:
    from agentrl import recipe
    from agentrl.trainer import Trainer
    from tests.helpers.trainer_helpers import PROTOCOL

    return Trainer(
        config=config,
        backend=backend,
        env_factory=recipe.env_factory_for(config),
        tasks=recipe.tasks_for(config, ["train"]),
        renderer=recipe.renderer_for(tokenizer, PROTOCOL),
        protocol=PROTOCOL,
        progress=False,
    )


@pytest.mark.parametrize("k", [0, 2])
async def test_no_datum_older_than_k_updates_is_trained(
    tmp_path: Path, qwen_tokenizer: Any, k: int
) -> None:
    config = toy_config(
        tmp_path / "run",
        max_steps=4,
        save_every=4,
        group_size=2,
        max_episode_steps=3,
        max_steps_off_policy=k,
        dynamic_sampling_budget=2,
    )
    inner = tiny_backend(config, qwen_tokenizer)
    backend = VersionCheckingBackend(inner, qwen_tokenizer, config.seed)
    result = await _trainer(config, qwen_tokenizer, backend).run()
    assert result.last_update == 4
    trained = [s for batch in backend.staleness for s in batch]
    assert trained and max(trained) <= k
    if k == 0:
        assert set(trained) == {0}
        assert not any(key.startswith("offpolicy/") for m in result.metrics for key in m.sampling)
    else:
        staleness = [m.sampling["offpolicy/staleness"] for m in result.metrics]
        assert staleness == [0.0, 1.0, 2.0, 2.0]
        assert max(trained) >= 1  # the pipeline did run ahead
    for m in result.metrics:
        assert m.groups == config.games_per_batch
        assert {"dynamic/extra_games", "dynamic/replaced_groups"} <= set(m.sampling)
        assert m.sampling["dynamic/extra_games"] <= 2
        assert (
            m.sampling["stragglers/group_seconds_max"]
            >= m.sampling["stragglers/group_seconds_p50"]
            > 0
        )
        assert "sampling/dynamic/extra_games" in m.as_flat(prefix="")


async def test_resume_with_k1_restarts_the_pipeline_fresh(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """k >= 1 resumes from the checkpoint with nothing running ahead: the first resumed
    update is sampled by the latest weights (staleness 0), then the pipeline refills."""
    small = {"save_every": 2, "group_size": 2, "max_episode_steps": 2, "max_steps_off_policy": 1}
    config = toy_config(tmp_path / "run", max_steps=2, **small)
    inner = tiny_backend(config, qwen_tokenizer)
    first = _trainer(config, qwen_tokenizer, PolicyDrivenBackend(inner, qwen_tokenizer, 0))
    assert [m.sampling["offpolicy/staleness"] for m in (await first.run()).metrics] == [0, 1]
    resumed_config = config.model_copy(update={"resume": True, "max_steps": 4})
    backend = PolicyDrivenBackend(inner, qwen_tokenizer, 0)
    result = await _trainer(resumed_config, qwen_tokenizer, backend).run()
    assert backend.loads == ["update-0002"]
    assert [m.update for m in result.metrics] == [3, 4]
    assert [m.sampling["offpolicy/staleness"] for m in result.metrics] == [0, 1]
