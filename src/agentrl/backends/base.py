"""Model-side contracts: `Sampler` and `TrainingBackend`, and their parameter records.

The rollout engine samples only through `Sampler`; the trainer trains only through
`TrainingBackend`. Implementations: `agentrl.backends.pytrio` (remote LoRA service) and
`agentrl.backends.local` (torch + transformers + peft).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from agentrl.algo.datums import Datum
from agentrl.algo.loss_config import KLEstimator, LossConfig, LossName, LossNormalisation
from agentrl.algo.mismatch import LogprobMismatch
from agentrl.core.types import Completion

__all__ = [
    "AdamParams",
    "CheckpointRef",
    "ForwardBackwardResult",
    "KLEstimator",
    "LabellingTeacher",
    "LossConfig",
    "LossName",
    "LossNormalisation",
    "MaskMode",
    "Sampler",
    "SamplingParams",
    "Teacher",
    "TrainingBackend",
]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 2048
    stop_tokens: tuple[int, ...] = ()
    """Generation stops after any of these token ids (the stop token is kept)."""
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"SamplingParams.max_tokens must be >= 1, got {self.max_tokens}")


@runtime_checkable
class Sampler(Protocol):
    """Samples completions with per-token logprobs for a token prompt."""

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` independent completions of `prompt_tokens`."""
        ...


@runtime_checkable
class Teacher(Protocol):
    """Scores given tokens: the logprob of each token given the ones before it (on-policy
    distillation's teacher). Prompt-aligned like Tinker's `compute_logprobs`: one entry per
    token, the first None (nothing comes before it); None also where a service scored no
    logprob. `LocalSampler` and the PyTRIO/Tinker `RemoteSampler` are teachers."""

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        """`len(tokens)` entries: `None`, then log p(tokens[i] | tokens[:i]) for i >= 1."""
        ...


@runtime_checkable
class LabellingTeacher(Protocol):
    """Names its most likely next token at every position of given tokens (the teacher of
    distillation's `teacher_tokens` signal). Prompt-aligned like `Teacher.compute_logprobs`.
    `LocalSampler`, the PyTRIO/Tinker `RemoteSampler` and `VllmSampler` are."""

    async def top_tokens(self, tokens: Sequence[int]) -> list[int | None]:
        """`len(tokens)` entries: `None`, then argmax p(. | tokens[:i]) for i >= 1."""
        ...


@dataclass(frozen=True)
class AdamParams:
    """Adam(W) optimizer step parameters."""

    learning_rate: float = 1e-6
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 1.0
    """Clip the global gradient norm to this value; 0 disables clipping."""


@dataclass(frozen=True)
class ForwardBackwardResult:
    """What one forward/backward pass reports."""

    loss: float
    num_tokens: int
    """Assistant (trained) tokens in the batch."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    mismatch: LogprobMismatch | None = None
    """Sampler-vs-trainer logprob agreement over the assistant tokens (None: not reported)."""


class MaskMode(StrEnum):
    """How a datum's mask reaches a remote loss (the backend adapter's explicit choice)."""

    ZERO_ADVANTAGE = "zero_advantage"
    """Masked targets are sent with advantage 0: they still count in a service's per-token
    denominator (the published recipe)."""
    IGNORE_INDEX = "ignore_index"
    """Masked targets are sent as -100: only assistant tokens count."""


@dataclass(frozen=True)
class CheckpointRef:
    """Where a checkpoint lives: training state (resumable) and sampler weights."""

    name: str
    state_path: str
    sampler_path: str


@runtime_checkable
class TrainingBackend(Protocol):
    """Trains LoRA weights from datums and hands out samplers for the current weights."""

    async def sampler(self) -> Sampler:
        """A sampler for the current weights."""
        ...

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Accumulate gradients of `loss` over `datums`."""
        ...

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """Apply the accumulated gradients; return optimizer metrics (e.g. grad norm)."""
        ...

    async def save(self, name: str) -> CheckpointRef:
        """Save training state and sampler weights together."""
        ...

    async def load(self, ref: CheckpointRef) -> None:
        """Restore training state (weights and optimizer) from a checkpoint."""
        ...

    async def close(self) -> None:
        """Release what the backend holds (a remote session, a sampler engine); calling it
        twice is harmless. Whoever built the backend calls it."""
        ...
