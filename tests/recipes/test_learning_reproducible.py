"""A learning run is a function of its setup: the order requests arrive in changes nothing.

The same short learning recipe (warm start, held-out evaluations, Trainer updates with the
local backend) runs twice: once as it is, once with every environment step and reset delayed
by a random, unseeded amount, which reorders when branches and groups ask to sample and so
which requests share a batch. Every metric must be identical. It fails if a sampling seed is
taken in arrival order again (the sampler's own generator) or if a row's logits depend on the
rows batched beside it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentrl.env import EnvAction, EnvGroup, EnvGroupFactory, EnvGroupWrapper, EnvStep, TaskInfo

SHORT = dict(
    updates=3,
    games_per_batch=4,
    group_size=4,
    train_games=64,
    eval_games=8,
    eval_samples=4,
    eval_every=1,
    demos=64,
    sft_steps=100,
    sft_batch=16,
)


class _Delayed(EnvGroupWrapper):
    """An `EnvGroup` whose reset and steps wait a random (unseeded) few milliseconds."""

    def __init__(self, inner: EnvGroup, jitter: random.Random) -> None:
        super().__init__(inner)
        self.jitter = jitter

    async def _wait(self) -> None:
        await asyncio.sleep(self.jitter.random() * 0.004)

    async def reset(self) -> list[EnvStep]:
        await self._wait()
        return await self.inner.reset()

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        await self._wait()
        return await self.inner.step(actions)


def _delayed(factory: EnvGroupFactory) -> EnvGroupFactory:
    jitter = random.Random()  # deliberately unseeded: a different order every run

    def make(task: TaskInfo, group_size: int) -> EnvGroup:
        return _Delayed(factory(task, group_size), jitter)

    return make


def _training_numbers(metrics: object) -> tuple[float, ...]:
    """Everything an update reports but its timings (loss, logprob gap, grad norm, tokens)."""
    from agentrl.metrics import UpdateMetrics

    assert isinstance(metrics, UpdateMetrics)
    numbers = [
        metrics.stats.success_rate,
        float(metrics.degenerate_groups),
        float(metrics.trained_tokens),
        metrics.loss if metrics.loss is not None else -1.0,
        metrics.sampler_kl if metrics.sampler_kl is not None else -1.0,
        metrics.logprob_diff_max if metrics.logprob_diff_max is not None else -1.0,
    ]
    numbers += [value for _, value in sorted(metrics.backend.items())]
    return tuple(numbers)


async def _run(tmp: Path, delayed: bool) -> tuple[object, ...]:
    import torch

    from agentrl.learning import LearningSetup, fetch_tokenizer, run_learning

    setup = LearningSetup(**SHORT)  # type: ignore[arg-type]
    losses: list[tuple[float, ...]] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = await run_learning(
            setup,
            fetch_tokenizer(setup),
            tmp,
            on_update=lambda m: losses.append(_training_numbers(m)),
            wrap_env=_delayed if delayed else None,
        )
    finally:
        torch.set_num_threads(threads)
    curve = tuple((p.update, p.success, p.reward, p.invalid_per_turn) for p in result.curve)
    return result.random_success, curve, result.train_success, tuple(losses)


async def test_same_metrics_whatever_the_arrival_order(tmp_path: Path) -> None:
    plain = await _run(tmp_path / "plain", delayed=False)
    reordered = await _run(tmp_path / "reordered", delayed=True)
    assert plain[0] == reordered[0], "the random policy's held-out success differs"
    assert plain[1] == reordered[1], "the held-out curve differs"
    assert plain[2] == reordered[2], "the training batches' success differs"
    assert plain[3] == reordered[3], "the per-update training metrics differ"
    trained = [numbers for numbers in plain[3] if numbers[1] < SHORT["games_per_batch"]]
    assert trained, "no update had a learning signal: the check would be vacuous"
