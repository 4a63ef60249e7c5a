"""The recipe's environments chosen by name: the tool protocol, the env-group factory and the
games of the configured `--env` (alfworld, toy, pycode).

Until each environment ships an `EnvSpec` found by entry point, this module is the one place
that names the concrete environments (imported lazily, when a part is built). The generic
builders (tokenizer, renderer, backends, samplers) are `agentrl.training.build`; they are
re-exported here, so `agentrl.recipe` (the old path of both) offers every part.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.config import CommonConfig, EnvName
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
    "PYCODE_COUNTS",
    "TINY_MODEL",
    "TINY_MODEL_SEED",
    "TOY_SEEDS",
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

TOY_SEEDS = {"train": 0, "valid_seen": 10_000, "valid_unseen": 20_000}
"""First task seed of each toy split (disjoint ranges)."""

TOY_TRAIN_GAMES = 64
TOY_EVAL_GAMES = 16

PYCODE_COUNTS = {"train": 400, "valid_seen": 60, "valid_unseen": 60}
"""Tasks per pycode split the command line plays (cut by `limit_per_split`)."""


def tool_protocol_for(config: CommonConfig) -> ToolProtocol:
    """The environment's tool protocol (admissible actions listed per `show_admissible`)."""
    if config.env is EnvName.PYCODE:
        from agentrl.envs.pycode import pycode_tool_protocol

        return pycode_tool_protocol()
    if config.env is EnvName.TOY:
        from agentrl.envs.toy import toy_tool_protocol

        return toy_tool_protocol(include_admissible=config.show_admissible)
    from agentrl.envs.alfworld.tools import alfworld_tool_protocol

    return alfworld_tool_protocol(include_admissible=config.show_admissible)


def env_factory_for(config: CommonConfig) -> EnvGroupFactory:
    """The `EnvGroupFactory` of the configured environment."""
    if config.env is EnvName.PYCODE:
        from agentrl.envs.pycode import pycode_group_factory

        return pycode_group_factory()
    if config.env is EnvName.TOY:
        from agentrl.envs.toy import ToyEnvGroup

        steps = config.max_episode_steps

        def toy(task: TaskInfo, group_size: int) -> ToyEnvGroup:
            return ToyEnvGroup(task, group_size, max_steps=steps)

        return toy
    from agentrl.envs.alfworld import AlfworldEnvOptions, alfworld_group_factory
    from agentrl.envs.alfworld.pool import EnvWorkerPool

    options = AlfworldEnvOptions(max_steps=config.max_episode_steps, engine=config.env_engine.value)
    pool = None if config.env_workers == 0 else EnvWorkerPool(config.env_workers)
    return alfworld_group_factory(options, pool)


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
    if config.env is EnvName.PYCODE:
        from agentrl.envs.pycode import pycode_tasks

        found: list[TaskInfo] = []
        for split in splits:
            if split not in PYCODE_COUNTS:
                raise ValueError(
                    f"unknown split {split!r}; expected one of {sorted(PYCODE_COUNTS)}"
                )
            count = PYCODE_COUNTS[split]
            found.extend(pycode_tasks(split, min(count, limit_per_split or count)))
        return found
    if config.env is EnvName.TOY:
        from agentrl.envs.toy import toy_tasks

        out: list[TaskInfo] = []
        for split in splits:
            if split not in TOY_SEEDS:
                raise ValueError(f"unknown split {split!r}; expected one of {sorted(TOY_SEEDS)}")
            count = TOY_TRAIN_GAMES if split == "train" else TOY_EVAL_GAMES
            count = min(count, limit_per_split) if limit_per_split else count
            out.extend(toy_tasks(count, seed=TOY_SEEDS[split], split=split))
        return out
    from agentrl.envs.alfworld import AlfworldDataError, find_games

    games = find_games(config.data_root, splits=tuple(splits), progress=progress)
    tasks: list[TaskInfo] = []
    for split in splits:
        chosen = [g.to_task() for g in games if g.split == split]
        if not chosen:
            raise AlfworldDataError(
                f"no {split} games under the data root "
                f"{config.data_root or '(default)'}; generate some with `agentrl generate "
                f"--out DIR --{split.replace('_', '-')} 12` or choose another split"
            )
        tasks.extend(chosen[:limit_per_split] if limit_per_split else chosen)
    return tasks
