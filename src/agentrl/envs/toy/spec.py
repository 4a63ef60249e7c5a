"""The toy env's `EnvSpec` (entry point `toy` of the `agentrl.envs` group): seeded
carry-the-object tasks, one command tool."""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.config import CommonConfig
from agentrl.config.envspec import EnvSpec
from agentrl.core.types import TaskInfo
from agentrl.envs.toy.env import ToyEnvGroup, toy_tasks
from agentrl.envs.toy.tools import toy_tool_protocol
from agentrl.tools import ToolProtocol

__all__ = ["SPEC", "TOY_EVAL_GAMES", "TOY_SEEDS", "TOY_TRAIN_GAMES"]

TOY_SEEDS = {"train": 0, "valid_seen": 10_000, "valid_unseen": 20_000}
"""First task seed of each toy split (disjoint ranges)."""

TOY_TRAIN_GAMES = 64
TOY_EVAL_GAMES = 16


def _tasks(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    progress: bool = False,
) -> list[TaskInfo]:
    out: list[TaskInfo] = []
    for split in splits:
        if split not in TOY_SEEDS:
            raise ValueError(f"unknown split {split!r}; expected one of {sorted(TOY_SEEDS)}")
        count = TOY_TRAIN_GAMES if split == "train" else TOY_EVAL_GAMES
        count = min(count, limit_per_split) if limit_per_split else count
        out.extend(toy_tasks(count, seed=TOY_SEEDS[split], split=split))
    return out


def _group_factory(config: CommonConfig) -> _ToyFactory:
    return _ToyFactory(config.max_episode_steps)


class _ToyFactory:
    """Toy groups capped at `max_steps` steps."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps

    def __call__(self, task: TaskInfo, group_size: int) -> ToyEnvGroup:
        return ToyEnvGroup(task, group_size, max_steps=self.max_steps)


def _tool_protocol(config: CommonConfig) -> ToolProtocol:
    return toy_tool_protocol(include_admissible=config.show_admissible)


SPEC = EnvSpec(
    name="toy",
    summary="tiny built-in task: carry an object to a room with one command tool (tests)",
    splits=tuple(TOY_SEEDS),
    tasks=_tasks,
    group_factory=_group_factory,
    tool_protocol=_tool_protocol,
    config_fields=("max_episode_steps", "show_admissible"),
)
"""The toy env."""
