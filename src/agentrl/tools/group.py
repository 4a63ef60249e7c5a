"""`FunctionEnv` / `FunctionEnvGroup`: an environment written as a class of function tools.

A user subclasses `FunctionEnv`, decorates its tool methods with `@tool` and says when the
episode is over (`done`, `won`, `score`); `FunctionEnvGroup` makes K instances of it from one
task (so all branches start identically) and runs each branch's calls in order, branches
concurrently. A call that raises becomes an `Error: ...` output and makes the step
non-admissible (it counts as invalid); calls after the one that ended the episode are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from agentrl.core.types import EnvAction, EnvStep, TaskInfo
from agentrl.tools.functions import FunctionTool
from agentrl.tools.toolset import FunctionTools

__all__ = ["FunctionEnv", "FunctionEnvGroup", "function_env_factory"]

SKIPPED = "Skipped: the episode ended before this call."


class FunctionEnv:
    """One branch of a function-tool environment; subclass it and add `@tool` methods."""

    done: bool = False
    """Set by a tool when the episode is over."""
    won: bool = False
    """Set by a tool when the task is solved."""
    score: float = 0.0

    def observation(self) -> str:
        """The first observation (the task as the model first sees it)."""
        return ""

    def state_key(self) -> str | None:
        """An identifier of the branch's state (equal states, equal keys), or None."""
        return None

    async def close(self) -> None:
        """Release what the branch holds (processes, files); idempotent."""

    @classmethod
    def function_tools(cls) -> tuple[FunctionTool, ...]:
        """The class's `@tool` methods, in definition order (base classes first)."""
        found: dict[str, FunctionTool] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                if isinstance(value, FunctionTool):
                    found[value.name] = value
        return tuple(found.values())

    @classmethod
    def protocol(cls, system_prompt: str, *, max_calls: int = 1) -> FunctionTools:
        """A `FunctionTools` protocol over this class's tools."""
        return FunctionTools(cls.function_tools(), system_prompt, max_calls=max_calls)


def _render(result: object) -> str:
    if result is None:
        return ""
    return result if isinstance(result, str) else repr(result)


class FunctionEnvGroup:
    """An `EnvGroup` of K `FunctionEnv` branches built by `make(task)`."""

    def __init__(self, task: TaskInfo, size: int, make: Callable[[TaskInfo], FunctionEnv]) -> None:
        if size < 1:
            raise ValueError(f"group size must be >= 1, got {size}")
        self._task, self._size, self._make = task, size, make
        self._envs: list[FunctionEnv] = []
        self._steps: list[EnvStep] = []
        self._calls = [0] * size
        self._closed = False

    @property
    def task(self) -> TaskInfo:
        """The task the branches play."""
        return self._task

    @property
    def size(self) -> int:
        """Number of branches K."""
        return self._size

    def _record(self, env: FunctionEnv, text: str, outputs: tuple[str, ...], ok: bool) -> EnvStep:
        return EnvStep(
            observation=text,
            score=env.score,
            done=env.done,
            won=env.won,
            admissible=ok,
            state_key=env.state_key(),
            outputs=outputs,
        )

    async def reset(self) -> list[EnvStep]:
        """Build K fresh branches; their first observations are identical."""
        if self._closed:
            raise RuntimeError("FunctionEnvGroup is closed")
        await self._close_envs()
        self._envs = [self._make(self._task) for _ in range(self._size)]
        self._steps = [self._record(e, e.observation(), (), True) for e in self._envs]
        self._calls = [0] * self._size
        return list(self._steps)

    async def _run(self, branch: int, action: EnvAction) -> EnvStep:
        env = self._envs[branch]
        if isinstance(action, str):
            raise TypeError(
                "FunctionEnvGroup takes tool calls, got a command string; use a FunctionTools "
                "protocol (FunctionEnv.protocol(...)), not a CommandTool"
            )
        tools = {t.name: t.__get__(env) for t in type(env).function_tools()}
        outputs: list[str] = []
        ok = True
        for call in action:
            if env.done or env.won:
                outputs.append(SKIPPED)
                continue
            function = tools.get(call.name)
            try:
                if function is None:
                    raise KeyError(f"unknown tool {call.name!r}")
                outputs.append(_render(await function.invoke(call)))
            except Exception as exc:
                ok = False
                outputs.append(f"Error: {type(exc).__name__}: {exc}")
            self._calls[branch] += 1
        return self._record(env, "\n\n".join(outputs), tuple(outputs), ok)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Run each live branch's calls in order (branches concurrently)."""
        if self._closed:
            raise RuntimeError("FunctionEnvGroup is closed")
        if not self._steps:
            raise RuntimeError("FunctionEnvGroup.step() called before reset()")
        if len(actions) != self._size:
            raise ValueError(f"expected {self._size} actions, got {len(actions)}")
        live = [
            (i, a) for i, a in enumerate(actions) if a is not None and not self._steps[i].finished
        ]
        results = await asyncio.gather(*(self._run(i, a) for i, a in live))
        for (i, _), step in zip(live, results, strict=True):
            self._steps[i] = step
        return list(self._steps)

    async def _close_envs(self) -> None:
        envs, self._envs = self._envs, []
        for env in envs:
            await env.close()

    async def close(self) -> None:
        """Close every branch; idempotent."""
        self._closed = True
        await self._close_envs()


def function_env_factory(
    make: Callable[[TaskInfo], FunctionEnv],
) -> Callable[[TaskInfo, int], FunctionEnvGroup]:
    """An `EnvGroupFactory` building `FunctionEnvGroup`s of `make(task)` branches."""

    def factory(task: TaskInfo, group_size: int) -> FunctionEnvGroup:
        return FunctionEnvGroup(task, group_size, make)

    return factory
