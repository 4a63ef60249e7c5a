"""Training and sampling backends (plug-ins). Contracts live in `agentrl.backends.base`."""

from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    Sampler,
    SamplingParams,
    TrainingBackend,
)

__all__ = [
    "AdamParams",
    "CheckpointRef",
    "ForwardBackwardResult",
    "LossConfig",
    "LossName",
    "Sampler",
    "SamplingParams",
    "TrainingBackend",
]
