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
from agentrl.backends.replicas import (
    ReplicaFailure,
    ReplicaSampler,
    ReplicaStats,
    ReplicaTeacher,
    SamplingTeacher,
)

__all__ = [
    "AdamParams",
    "CheckpointRef",
    "ForwardBackwardResult",
    "LossConfig",
    "LossName",
    "ReplicaFailure",
    "ReplicaSampler",
    "ReplicaStats",
    "ReplicaTeacher",
    "Sampler",
    "SamplingParams",
    "SamplingTeacher",
    "TrainingBackend",
]
