"""The recipe's environment parts by name: the tool protocol, the env-group factory and the
games of the configured `--env`, each from the env's `EnvSpec` (found by entry point through
`agentrl.config.plugins.env_spec`; no concrete env is imported here). The generic
builders (tokenizer, renderer, backends, samplers) are `agentrl.training.build`; they are
re-exported here, so `agentrl.recipe` (the old path of both) offers every part.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrl._legacy import moved_name
from agentrl.config import CommonConfig
from agentrl.config.group_source import env_group_factory
from agentrl.config.plugins import env_spec
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.tools import ToolProtocol
from agentrl.training.build import (
    TINY_MODEL,
    TINY_MODEL_SEED,
    check_credentials,
    eval_sampler_for,
    local_backend_for,
    renderer_for,
    rollout_config_for,
    tokenizer_for,
    training_backend_for,
)

__all__ = [
    "TINY_MODEL",
    "TINY_MODEL_SEED",
    "check_credentials",
    "env_factory_for",
    "eval_sampler_for",
    "local_backend_for",
    "renderer_for",
    "rollout_config_for",
    "tasks_for",
    "tokenizer_for",
    "tool_protocol_for",
    "training_backend_for",
]


def __getattr__(name: str) -> object:
    """Old names that moved into their env's `EnvSpec` module (`TOY_SEEDS`, `PYCODE_COUNTS`)."""
    return moved_name(__name__, name)


def tool_protocol_for(config: CommonConfig) -> ToolProtocol:
    """The environment's tool protocol (admissible actions listed per `show_admissible`)."""
    return env_spec(config.env).tool_protocol(config)


def env_factory_for(config: CommonConfig) -> EnvGroupFactory:
    """The `EnvGroupFactory` of the configured environment under its `--env-executor` (built
    here, in worker processes or on Ray actors); whoever calls this closes it."""
    return env_group_factory(config)


def tasks_for(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    *,
    progress: bool = False,
) -> list[TaskInfo]:
    """The games of `splits` (each sorted by id, cut to `limit_per_split`), split by split.

    ALFWorld games come from the data root (`--data-root`, `$ALFWORLD_DATA`, the alfworld
    cache); a missing root raises `AlfworldDataError` saying how to get or generate games.
    """
    return env_spec(config.env).tasks(config, splits, limit_per_split, progress)
