"""`--stream-groups` through the real trainer, rollout engine, toy env and tiny local backend:
the streamed update trains exactly the weights of the batch update, training starts before
the last group is played, and what cannot stream exactly is refused before any rollout."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl import recipe  # noqa: E402
from agentrl.advantages import Advantages, GroupMean  # noqa: E402
from agentrl.backends.streaming import StreamingUnsupportedError  # noqa: E402
from agentrl.env import EnvAction  # noqa: E402
from agentrl.testing.signal import HashReward  # noqa: E402
from agentrl.trainer import Trainer, task_batch  # noqa: E402
from agentrl.types import EnvStep, TaskInfo, TrajectoryGroup  # noqa: E402
from tests.helpers.trainer_helpers import (  # noqa: E402
    PROTOCOL,
    PolicyDrivenBackend,
    prompt_seeded_policy,
    tiny_backend,
    toy_config,
)


def _trainer(config: Any, tokenizer: Any, backend: Any, **kw: Any) -> Trainer:
    return Trainer(
        config=config,
        backend=backend,
        env_factory=kw.pop("env_factory", None) or recipe.env_factory_for(config),
        tasks=recipe.tasks_for(config, ["train"]),
        renderer=recipe.renderer_for(tokenizer, PROTOCOL),
        protocol=PROTOCOL,
        progress=False,
        **kw,
    )


async def _one_update(run_dir: Path, tokenizer: Any, stream: bool, **overrides: Any) -> Any:
    config = toy_config(
        run_dir, max_steps=1, games_per_batch=3, group_size=3, stream_groups=stream, **overrides
    )
    inner = tiny_backend(config, tokenizer)
    policy = prompt_seeded_policy(config.seed)
    backend = PolicyDrivenBackend(inner, tokenizer, config.seed, policy=policy)
    reward = None if overrides.get("dynamic_sampling_budget") else HashReward()
    result = await _trainer(config, tokenizer, backend, reward_fn=reward).run()
    return inner, result.metrics[0]


CASES = [  # one game at a time: the first group's part starts alone, the others pile up
    {"normalisation": "tokens", "max_concurrent_games": 1},
    {"normalisation": "sequence", "max_concurrent_games": 1},
    {"normalisation": "tokens", "dynamic_sampling_budget": 3, "max_episode_steps": 2},
]


@pytest.mark.parametrize("overrides", CASES, ids=["tokens", "sequence", "dynamic-sampling"])
async def test_streamed_update_trains_the_weights_of_the_batch_update(
    tmp_path: Path, qwen_tokenizer: Any, overrides: dict[str, Any]
) -> None:
    batch_backend, batch = await _one_update(tmp_path / "batch", qwen_tokenizer, False, **overrides)
    stream_backend, streamed = await _one_update(
        tmp_path / "stream", qwen_tokenizer, True, **overrides
    )
    assert streamed.stats == batch.stats  # the same trajectories were played
    assert streamed.sampling.keys() == batch.sampling.keys()
    assert streamed.trained_tokens == batch.trained_tokens > 0
    assert streamed.loss == pytest.approx(batch.loss, rel=1e-5, abs=1e-7)
    assert streamed.backend["grad_norm"] == pytest.approx(batch.backend["grad_norm"], rel=1e-4)
    left, right = batch_backend.trainable_parameters(), stream_backend.trainable_parameters()
    for a, b in zip(left, right, strict=True):
        torch.testing.assert_close(b.detach(), a.detach(), rtol=1e-5, atol=1e-6)
    assert streamed.backend["fb/parts"] >= 2 and "fb/parts" not in batch.backend
    assert "stream_overlap" in streamed.timings and "stream_overlap" not in batch.timings
    assert 0.0 <= streamed.timings["stream_overlap"] <= streamed.timings["forward_backward"]
    if "dynamic_sampling_budget" in overrides:  # the composition was exercised
        assert batch.sampling["dynamic/replaced_groups"] >= 1


class GatedGroup:
    """An env group whose reset waits for `gate`: its game cannot finish before it is set."""

    def __init__(self, inner: Any, gate: asyncio.Event) -> None:
        self.inner, self.gate = inner, gate

    @property
    def task(self) -> TaskInfo:
        return self.inner.task  # type: ignore[no-any-return]

    @property
    def size(self) -> int:
        return self.inner.size  # type: ignore[no-any-return]

    async def reset(self) -> list[EnvStep]:
        await self.gate.wait()
        return await self.inner.reset()  # type: ignore[no-any-return]

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        return await self.inner.step(actions)  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.inner.close()


class GateOpeningStream:
    """The inner stream; its first part opens the gate (and records that it came first)."""

    def __init__(self, inner: Any, gate: asyncio.Event, log: list[str]) -> None:
        self.inner, self.gate, self.log = inner, gate, log

    async def add(self, datums: Any) -> Any:
        self.log.append("forward_backward")
        self.gate.set()
        return await self.inner.add(datums)

    async def finish(self) -> Any:
        return await self.inner.finish()

    async def abort(self) -> None:
        await self.inner.abort()


async def test_training_starts_before_the_last_group_finishes(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    """The second game cannot even reset until a forward_backward part has started: the run
    completes only if the first group was trained while the second was still to be played
    (no timing involved; the wait_for is a guard against a hang)."""
    config = toy_config(tmp_path / "run", max_steps=1, games_per_batch=2, stream_groups=True)
    gate, log = asyncio.Event(), []
    gated = task_batch(recipe.tasks_for(config, ["train"]), 2, config.seed, 0)[1].task_id
    plain = recipe.env_factory_for(config)

    def factory(task: TaskInfo, group_size: int) -> Any:
        group = plain(task, group_size)
        if task.task_id != gated:
            return group
        log.append("gated game starts")
        return GatedGroup(group, gate)

    class Backend(PolicyDrivenBackend):
        def open_stream(self, loss: Any, config: Any) -> Any:
            return GateOpeningStream(super().open_stream(loss, config), gate, log)

    inner = tiny_backend(config, qwen_tokenizer)
    backend = Backend(inner, qwen_tokenizer, config.seed)
    trainer = _trainer(config, qwen_tokenizer, backend, env_factory=factory, reward_fn=HashReward())
    result = await asyncio.wait_for(trainer.run(), timeout=300)
    (metrics,) = result.metrics
    assert log[:2] == ["gated game starts", "forward_backward"]
    assert metrics.backend["fb/parts"] == 2.0  # one part per game
    assert metrics.timings["stream_overlap"] > 0.0
    assert metrics.trained_tokens > 0


class BatchNormalized:
    """A custom estimator that does not say it is group-local."""

    def estimate(self, groups: Sequence[TrajectoryGroup]) -> Advantages:
        return GroupMean().estimate(groups)


def test_streaming_refuses_an_estimator_that_is_not_group_local(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    config = toy_config(tmp_path / "run", stream_groups=True)
    backend = PolicyDrivenBackend(tiny_backend(config, qwen_tokenizer), qwen_tokenizer, 0)
    with pytest.raises(ValueError, match="group_local = True"):
        _trainer(config, qwen_tokenizer, backend, estimator=BatchNormalized())


def test_streaming_refuses_a_backend_without_a_gradient_stream(
    tmp_path: Path, qwen_tokenizer: Any
) -> None:
    class NoStream(PolicyDrivenBackend):
        open_stream = None  # type: ignore[assignment]

    config = toy_config(tmp_path / "run", stream_groups=True)
    inner = tiny_backend(config, qwen_tokenizer)
    with pytest.raises(StreamingUnsupportedError, match="--stream-groups"):
        _trainer(config, qwen_tokenizer, NoStream(inner, qwen_tokenizer, 0))
