"""The toy envs' `EnvSpec`s: `SPEC` (entry point `toy` of the `agentrl.envs` group: seeded
carry-the-object tasks, one command tool), `FETCH_SPEC` (`toy-fetch`: the learning recipe's
fetch task, one command tool) and `VAULT_SPEC` (`toy-vault`: remember a code told once; function
tools that also list their commands, `vault_spec` for other sizes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentrl.config import CommonConfig
from agentrl.config.envspec import EnvSpec, TasksFn
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.envs.toy.env import ToyEnvGroup, toy_tasks
from agentrl.envs.toy.fetch import fetch_group_factory, fetch_solution, fetch_tasks
from agentrl.envs.toy.tools import toy_tool_protocol
from agentrl.envs.toy.vault import vault_group_factory, vault_protocol, vault_tasks
from agentrl.tools import CommandTool, ToolProtocol

__all__ = [
    "FETCH_SPEC",
    "LEARNING_SEEDS",
    "SPEC",
    "TOY_EVAL_GAMES",
    "TOY_SEEDS",
    "TOY_TRAIN_GAMES",
    "VAULT_SPEC",
    "vault_spec",
]

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


LEARNING_SEEDS = {"train": 0, "valid_unseen": 100_000}
"""First task seed of each split of the learning envs (`toy-fetch`, `toy-vault`)."""
LEARNING_COUNTS = {"train": 2048, "valid_unseen": 48}
"""Tasks per split (before `limit_per_split`)."""


def _seeded_tasks(make: Callable[[int, int, str], list[TaskInfo]]) -> TasksFn:
    """A `TasksFn` over `LEARNING_SEEDS`: `make(count, first_seed, split)` per split."""

    def tasks(
        config: CommonConfig,
        splits: Sequence[str],
        limit_per_split: int | None = None,
        progress: bool = False,
    ) -> list[TaskInfo]:
        out: list[TaskInfo] = []
        for split in splits:
            if split not in LEARNING_SEEDS:
                raise ValueError(
                    f"unknown split {split!r}; expected one of {sorted(LEARNING_SEEDS)}"
                )
            count = LEARNING_COUNTS[split]
            count = min(count, limit_per_split) if limit_per_split else count
            out.extend(make(count, LEARNING_SEEDS[split], split))
        return out

    return tasks


FETCH_OBJECTS, FETCH_RECEPTACLE_COUNT = 4, 1


def _fetch_tasks(count: int, seed: int, split: str) -> list[TaskInfo]:
    return fetch_tasks(count, seed, split, FETCH_OBJECTS, FETCH_RECEPTACLE_COUNT)


def _fetch_factory(config: CommonConfig) -> EnvGroupFactory:
    return fetch_group_factory(FETCH_OBJECTS, FETCH_RECEPTACLE_COUNT, config.max_episode_steps)


def _fetch_protocol(config: CommonConfig) -> ToolProtocol:
    return CommandTool(
        name="fetch_step",
        description="Run one command: take OBJECT; put OBJECT in RECEPTACLE.",
        system_prompt="Do the task by calling the fetch_step tool, one call per turn.",
        include_admissible=config.show_admissible,
    )


FETCH_SPEC = EnvSpec(
    name="toy-fetch",
    summary="the learning recipe's task: fetch the object the goal names (4 objects, 1 bin)",
    splits=tuple(LEARNING_SEEDS),
    tasks=_seeded_tasks(_fetch_tasks),
    group_factory=_fetch_factory,
    tool_protocol=_fetch_protocol,
    config_fields=("max_episode_steps", "show_admissible"),
    privileged=fetch_solution,
)
"""The fetch task (`agentrl.envs.toy.fetch`) at the learning recipe's size, one command tool."""


def vault_spec(buttons: int = 4, rooms: int = 3) -> EnvSpec:
    """The vault task (`agentrl.envs.toy.vault`) with `buttons` buttons and `rooms` rooms: a
    `VaultEnv` per branch, its function tools (`walk`, `press`) as the tool protocol."""

    def make(count: int, seed: int, split: str) -> list[TaskInfo]:
        return vault_tasks(count, seed, split, buttons, rooms)

    return EnvSpec(
        name="toy-vault",
        summary=f"remember a code told once: walk {rooms} rooms, press 1 of {buttons} buttons",
        splits=tuple(LEARNING_SEEDS),
        tasks=_seeded_tasks(make),
        group_factory=lambda config: vault_group_factory(buttons, rooms),
        tool_protocol=lambda config: vault_protocol(),
    )


VAULT_SPEC = vault_spec()
"""The vault task at its default size (4 buttons, 3 rooms)."""
