"""A real tiny local backend whose rollouts come from a seeded text policy (toy env).

The random-initialised tiny model never writes a tool call, so every group it plays is
degenerate. `PolicyDrivenBackend` keeps the real `LocalBackend` for training (torch forward /
backward, AdamW, checkpoints) but hands out a `PolicySampler` that plays seeded random toy
actions (some not admissible), so groups have different rewards and updates train.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl import recipe
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
)
from agentrl.backends.streaming import GradientStream
from agentrl.config import TrainConfig
from agentrl.datums import Datum
from agentrl.envs.toy import toy_tool_protocol
from agentrl.envs.toy.policies import noisy_toy_policy
from agentrl.testing import PolicySampler
from agentrl.trainer import Trainer

PROTOCOL = toy_tool_protocol()
HEADING = "Available actions (copy one exactly):"


def toy_policy(seed: int) -> Callable[[str], str]:
    """Replies: a random listed action (70%), an impossible one (20%) or no call (10%)."""
    return noisy_toy_policy(seed)


def prompt_seeded_policy(seed: int) -> Callable[[str], str]:
    """Like `toy_policy`, but each reply is drawn from a generator seeded by the prompt and how
    often it was asked: the same trajectories whatever order concurrent rollouts ask in."""
    return noisy_toy_policy(seed, prompt_seeded=True)


class PolicyDrivenBackend:
    """`TrainingBackend`: a real `LocalBackend` for training, a text policy for sampling."""

    def __init__(
        self, inner: Any, tokenizer: Any, seed: int, policy: Callable[[str], str] | None = None
    ) -> None:
        self.inner = inner
        self._sampler = PolicySampler(tokenizer, policy or toy_policy(seed))
        self.loads: list[str] = []

    async def sampler(self) -> PolicySampler:
        return self._sampler

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        result: ForwardBackwardResult = await self.inner.forward_backward(datums, loss, config)
        return result

    def open_stream(self, loss: LossName, config: LossConfig) -> GradientStream:
        stream: GradientStream = self.inner.open_stream(loss, config)
        return stream

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        metrics: Mapping[str, float] = await self.inner.optim_step(adam)
        return metrics

    async def save(self, name: str) -> CheckpointRef:
        ref: CheckpointRef = await self.inner.save(name)
        return ref

    async def load(self, ref: CheckpointRef) -> None:
        self.loads.append(ref.name)
        await self.inner.load(ref)


def toy_config(run_dir: Path, **overrides: Any) -> TrainConfig:
    """A small toy-env training config on the tiny model."""
    values: dict[str, Any] = dict(
        base_model="tiny",
        backend="local",
        device="cpu",
        env="toy",
        max_steps=4,
        games_per_batch=2,
        group_size=3,
        max_episode_steps=4,
        max_assistant_tokens=64,
        max_trajectory_tokens=3000,
        learning_rate=1e-3,
        lora_rank=4,
        save_every=2,
        run_dir=run_dir,
    )
    values.update(overrides)
    return TrainConfig.model_validate(values)


def tiny_backend(config: TrainConfig, tokenizer: Any) -> Any:
    """The real tiny `LocalBackend` for `config`."""
    return recipe.local_backend_for(
        config, tokenizer, config.run_dir / "checkpoints", config.lora_rank
    )


def toy_trainer(config: TrainConfig, tokenizer: Any, inner: Any = None, **kwargs: Any) -> Trainer:
    """A trainer on the toy env with a `PolicyDrivenBackend` over `inner` (default: new)."""
    if inner is None:
        inner = tiny_backend(config, tokenizer)
    inner.checkpoint_dir = config.run_dir / "checkpoints"
    backend = PolicyDrivenBackend(inner, tokenizer, config.seed)
    return toy_env_trainer(config, tokenizer, backend, **kwargs)


def toy_env_trainer(config: TrainConfig, tokenizer: Any, backend: Any, **kwargs: Any) -> Trainer:
    """A trainer on the toy env's training games with `backend` as it is (no progress bar)."""
    return Trainer(
        config=config,
        backend=backend,
        env_factory=recipe.env_factory_for(config),
        tasks=recipe.tasks_for(config, ["train"]),
        renderer=recipe.renderer_for(tokenizer, PROTOCOL),
        protocol=PROTOCOL,
        progress=False,
        **kwargs,
    )


class RecordingBackend:
    """A real backend, with the datums of each `forward_backward` kept for the test."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[list[Datum]] = []
        self.losses: list[Any] = []
        """The loss of each `forward_backward`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def forward_backward(self, datums: Any, loss: Any, config: Any) -> Any:
        self.batches.append(list(datums))
        self.losses.append(loss)
        return await self.inner.forward_backward(datums, loss, config)
