"""Environment contracts: `EnvGroup` (K branches of one task) and its factory.

An `EnvGroup` holds K independent copies of one task that start from an identical state.
`step(actions)` advances only the branches that got an action (`None` leaves a branch as it
is: it is finished, or its tool call was invalid). A branch's action is an `EnvAction`: the
turn's tool calls (function tools, `agentrl.tools.FunctionTools`), or, for a text-command
environment (the one-tool case, `CommandTool`), the command string; `command_of` reads the
command from either. A single environment is the K=1 case.
A factory that holds a resource (a worker pool) is a `ClosableEnvFactory`: it declares
`async close()`. Whoever builds the factory closes it (`close_env_factory`); a trainer or an
evaluation that is handed one leaves it open.
The checker that every implementation must pass lives in `agentrl.testing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentrl.core.types import EnvAction, EnvStep, TaskInfo

__all__ = [
    "ClosableEnvFactory",
    "EnvAction",
    "EnvGroup",
    "EnvGroupFactory",
    "EnvGroupWrapper",
    "EnvStep",
    "PlacedEnvGroup",
    "TaskInfo",
    "close_env_factory",
    "command_of",
]


def command_of(action: EnvAction) -> str:
    """The command of a text-command turn: the string itself, or the one argument of the one
    call (what `CommandTool` sends either way); anything else raises ValueError."""
    if isinstance(action, str):
        return action
    if len(action) != 1 or len(action[0].arguments) != 1:
        raise ValueError(
            f"a text-command environment takes one call with one argument, got {action!r}"
        )
    (value,) = action[0].arguments.values()
    return value


@runtime_checkable
class EnvGroup(Protocol):
    """K independent environments of one task with identical initial state."""

    @property
    def task(self) -> TaskInfo:
        """The task these branches play."""
        ...

    @property
    def size(self) -> int:
        """Number of branches K."""
        ...

    async def reset(self) -> list[EnvStep]:
        """Start every branch; all K initial steps must be identical."""
        ...

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Advance each branch whose action is not None; return the current step of all K.

        A multi-call action is executed call by call, in order; the step's `outputs` hold one
        result per call."""
        ...

    async def close(self) -> None:
        """Release resources; calling it twice is harmless."""
        ...


class EnvGroupWrapper:
    """An `EnvGroup` around another (`inner`): every call goes to `inner`; a subclass overrides
    what it changes (e.g. `reset` and `step` to rewrite what the agent sees)."""

    def __init__(self, inner: EnvGroup) -> None:
        self.inner = inner

    @property
    def task(self) -> TaskInfo:
        """The task of `inner`."""
        return self.inner.task

    @property
    def size(self) -> int:
        """Number of branches K of `inner`."""
        return self.inner.size

    async def reset(self) -> list[EnvStep]:
        """Reset `inner`."""
        return await self.inner.reset()

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Step `inner`."""
        return await self.inner.step(actions)

    async def close(self) -> None:
        """Close `inner`."""
        await self.inner.close()


@runtime_checkable
class PlacedEnvGroup(EnvGroup, Protocol):
    """An `EnvGroup` that says where it runs (the executors' remote groups do): the rollout
    engine records it in each trajectory (`Trajectory.placement`)."""

    @property
    def placement(self) -> str | None:
        """Where the group is played (a node, host and process); None before `reset()`."""
        ...


class EnvGroupFactory(Protocol):
    """Builds the K-branch group of one task (the rollout engine's only way to make envs)."""

    def __call__(self, task: TaskInfo, group_size: int) -> EnvGroup:
        """Create a group of `group_size` branches of `task` (not yet reset)."""
        ...


@runtime_checkable
class ClosableEnvFactory(EnvGroupFactory, Protocol):
    """An `EnvGroupFactory` that owns a resource (e.g. a worker pool) and releases it."""

    async def close(self) -> None:
        """Stop what the factory holds; calling it twice is harmless."""
        ...


async def close_env_factory(factory: EnvGroupFactory | ClosableEnvFactory) -> None:
    """Close a factory that declares `ClosableEnvFactory.close`; a plain function holds
    nothing and is left as it is. Call it only on a factory you built."""
    if isinstance(factory, ClosableEnvFactory):
        await factory.close()
