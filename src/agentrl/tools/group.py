"""`FunctionEnv` / `FunctionEnvGroup`: an environment written as a class of function tools.

A user subclasses `FunctionEnv`, decorates its tool methods with `@tool` and says when the
episode is over (`done`, `won`, `score`); `FunctionEnvGroup` makes K instances of it from one
task (so all branches start identically) and runs each branch's calls in order, branches
concurrently. A call that raises becomes an `Error: ...` output and makes the step
non-admissible (it counts as invalid); a call that raises `ToolInfraError` (the database is
down, not the model's fault) ends the branch as `env_error` instead, with where it was raised,
and is left out of its group's statistics. Calls after the one that ended the episode are
skipped.

An env that also lists its executable commands (`admissible_actions()`, e.g. `press red`) serves
small plain-command models too: the group reports them in `EnvStep.admissible_actions`, and a
command string from a plain-command protocol (`agentrl.tools.command.PlainCommandProtocol`)
runs as the tool call `command_call(command)` names (by default `press red` is
`press(button="red")`: the first word names the tool, the rest is its one parameter). A command
that is not listed runs nothing and is non-admissible. Tool-call protocols work as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

from agentrl.core.errors import ToolInfraError, describe_exception
from agentrl.core.types import EnvAction, EnvStep, TaskInfo, ToolCall
from agentrl.tools.functions import FunctionTool
from agentrl.tools.toolset import FunctionTools

__all__ = [
    "NOT_LISTED",
    "FunctionEnv",
    "FunctionEnvGroup",
    "function_env_factory",
    "normal_command",
]

SKIPPED = "Skipped: the episode ended before this call."
NOT_LISTED = "Error: {command!r} is not one of the available actions; nothing happened."


def normal_command(command: str) -> str:
    """A command as plain-command protocols compare it: lower case, single spaces."""
    return " ".join(command.split()).lower()


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

    def admissible_actions(self) -> tuple[str, ...]:
        """The commands executable now (`press red`), for plain-command protocols and
        `EnvStep.admissible_actions`; () (the default) when the env lists none, and then it
        takes tool calls only."""
        return ()

    def command_call(self, command: str) -> ToolCall:
        """The tool call a listed command runs. By default the first word names the tool and
        the rest is its one parameter (`press red` -> `press(button="red")`; a tool without
        parameters takes the bare name); override it for other command forms."""
        name, _, rest = command.strip().partition(" ")
        tools = {t.name: t for t in type(self).function_tools()}
        if name not in tools:
            raise ValueError(f"command {command!r} names no tool; tools: {', '.join(tools)}")
        parameters = list(tools[name].arguments.model_fields)
        if not parameters:
            if rest.strip():
                raise ValueError(f"tool {name!r} takes no argument, got {command!r}")
            return ToolCall(name=name, arguments={})
        if len(parameters) > 1:
            raise ValueError(
                f"tool {name!r} has {len(parameters)} parameters: override "
                f"{type(self).__name__}.command_call to read {command!r}"
            )
        return ToolCall(name=name, arguments={parameters[0]: rest.strip()})

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
        finished = env.done or env.won
        return EnvStep(
            observation=text,
            score=env.score,
            done=env.done,
            won=env.won,
            admissible=ok,
            admissible_actions=() if finished else tuple(env.admissible_actions()),
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

    async def _command(self, branch: int, command: str) -> EnvStep:
        """Run a plain-command protocol's command: the listed action it matches, as a call."""
        env = self._envs[branch]
        if type(env).admissible_actions is FunctionEnv.admissible_actions:
            raise TypeError(
                "FunctionEnvGroup takes tool calls, got a command string; use a FunctionTools "
                "protocol (FunctionEnv.protocol(...)), or list the env's commands with "
                f"{type(env).__name__}.admissible_actions() to drive it with plain commands"
            )
        listed = {normal_command(a): a for a in env.admissible_actions()}
        action = listed.get(normal_command(command))
        if action is None:
            self._calls[branch] += 1
            return self._record(env, NOT_LISTED.format(command=command), (), False)
        try:
            call = env.command_call(action)
        except Exception as exc:
            self._calls[branch] += 1
            return self._record(env, f"Error: {type(exc).__name__}: {exc}", (), False)
        step = await self._run(branch, (call,))
        return replace(step, outputs=())  # a text-command step: the observation is the output

    async def _run(self, branch: int, action: EnvAction) -> EnvStep:
        if isinstance(action, str):
            return await self._command(branch, action)
        env = self._envs[branch]
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
            except ToolInfraError as exc:  # the infrastructure's fault: env_error, not invalid
                self._calls[branch] += 1
                failed = self._record(env, "\n\n".join(outputs), tuple(outputs), ok)
                return replace(failed, error=describe_exception(exc))
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
