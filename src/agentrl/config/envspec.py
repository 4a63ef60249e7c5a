"""`EnvSpec`: what an environment plug-in declares, so the command line, the configs, evaluation
and the training builders can use it by name without importing it.

An env package exposes one `EnvSpec` object and names it in the `agentrl.envs` entry-point group
of its `pyproject.toml` (`agentrl.config.plugins.env_spec(name)` finds it):

```toml
[project.entry-points."agentrl.envs"]
myenv = "mypkg.spec:SPEC"
```
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.rollout import PlayFn, RolloutConfig
from agentrl.tools import ToolProtocol

if TYPE_CHECKING:
    from agentrl.config.common import CommonConfig

__all__ = ["Baseline", "BaselineFactory", "EnvSpec", "TasksFn"]


class TasksFn(Protocol):
    """The tasks of `splits` (each cut to `limit_per_split`), split by split."""

    def __call__(
        self,
        config: CommonConfig,
        splits: Sequence[str],
        limit_per_split: int | None = None,
        progress: bool = False,
    ) -> list[TaskInfo]:
        """The tasks of `splits`."""
        ...


class BaselineFactory(Protocol):
    """Builds the player of a non-model baseline (it plays through the rollout engine)."""

    def __call__(
        self,
        *,
        env_factory: EnvGroupFactory,
        renderer: ChatRenderer,
        protocol: ToolProtocol,
        rollout: RolloutConfig,
        reward_fn: RewardFn,
    ) -> PlayFn:
        """The baseline's `PlayFn`."""
        ...


@dataclass(frozen=True)
class Baseline:
    """A scripted player `agentrl eval --policy NAME` can use instead of a model."""

    policy: str
    """The `--policy` value that chooses it (`planner`, `solver`)."""
    plays: str
    """What it plays, for error messages ("ALFWorld games")."""
    player: BaselineFactory
    """Builds its `PlayFn`."""


@dataclass(frozen=True)
class EnvSpec:
    """An environment plug-in: its name, tasks, env-group factory, tools and defaults."""

    name: str
    """The name `--env` takes (and the entry point's name)."""
    summary: str
    """One line for `agentrl envs`."""
    splits: tuple[str, ...]
    """The task splits it offers (`train`, `valid_seen`, ...)."""
    tasks: TasksFn
    """`tasks(config, splits, limit_per_split, progress)`: the tasks of those splits."""
    group_factory: Callable[[CommonConfig], EnvGroupFactory]
    """The `EnvGroupFactory` for a config."""
    tool_protocol: Callable[[CommonConfig], ToolProtocol]
    """The tool protocol for a config."""
    reward: Callable[[CommonConfig], RewardFn | None] | None = None
    """The env's default reward for a config (None: the configured `--reward`)."""
    baseline: Baseline | None = None
    """The env's first scripted baseline (kept for specs with one; `baselines` lists all)."""
    config_fields: tuple[str, ...] = ()
    """The config fields the env reads (listed by `agentrl envs`)."""
    generate: Callable[[argparse.Namespace], int] | None = None
    """`agentrl generate --env NAME`: writes task files from the parsed flags; exit status."""
    privileged: Callable[[TaskInfo], str | None] | None = None
    """What a teacher may know that the agent is not told (e.g. the solution), for on-policy
    self-distillation (`agentrl train --objective opsd`); None: the env offers none."""
    baselines: tuple[Baseline, ...] = field(default=())
    """Every scripted baseline player for evaluation; a given `baseline` is always among them
    (first), and `baseline` is set to the first of them. Policy names must be distinct."""

    def __post_init__(self) -> None:
        merged = self.baselines
        if self.baseline is not None and self.baseline not in merged:
            merged = (self.baseline, *merged)
        policies = [b.policy for b in merged]
        duplicates = sorted({p for p in policies if policies.count(p) > 1})
        if duplicates:
            raise ValueError(f"env {self.name!r}: two baselines named {', '.join(duplicates)}")
        object.__setattr__(self, "baselines", merged)
        object.__setattr__(self, "baseline", merged[0] if merged else None)

    @property
    def policies(self) -> tuple[str, ...]:
        """The `--policy` values of its baselines."""
        return tuple(b.policy for b in self.baselines)

    def baseline_for(self, policy: str) -> Baseline | None:
        """The baseline `--policy policy` names, or None."""
        return next((b for b in self.baselines if b.policy == policy), None)

    def reward_for(self, config: CommonConfig) -> RewardFn | None:
        """The env's reward for `config`, or None where the configured reward applies."""
        return None if self.reward is None else self.reward(config)
