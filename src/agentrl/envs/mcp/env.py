"""`McpEnv` / `McpEnvGroup`: an environment whose tools are an MCP server's, plus its own.

A user subclasses `McpEnv` like a `FunctionEnv`: `@tool` methods are local tools (e.g.
`submit(answer)`, which sets `done`, `won` and `score`: the env, not the server, decides when an
episode ends and whether it is won), `observation()` is the first observation, and
`session_scope` says whether each branch gets its own server session or the group shares one.
`setup()` may prepare a branch's server state and any env code may call the server
(`call_server`). `McpEnvGroup` (built by `McpEnvFactory`) makes K branches of one task, opens
their sessions on `reset()` and closes them on `close()`.

How a step ends: a local tool that raises, and a server result with `isError`, are an
`Error: ...` output and a non-admissible step (the model's mistake, seen by the model). A server
that crashed, dropped the connection, timed out or answered with a protocol error is an
infrastructure failure: that branch's step carries `EnvStep.error` (the rollout records
`env_error`), never a tool result or a reward; other branches and groups go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agentrl.core.errors import ToolInfraError, describe_exception
from agentrl.core.types import EnvAction, EnvStep, JsonValue, TaskInfo
from agentrl.envs.mcp.config import McpServer, McpServerError, McpStartError, SessionScope
from agentrl.envs.mcp.results import McpResult, clip
from agentrl.envs.mcp.session import McpSession
from agentrl.envs.mcp.toolset import McpTools
from agentrl.tools import FunctionEnv, FunctionTools

__all__ = ["McpEnv", "McpEnvFactory", "McpEnvGroup"]

log = logging.getLogger(__name__)

SKIPPED = "Skipped: the episode ended before this call."
NOT_RUN = "Skipped: the MCP server failed before this call."


class McpEnv(FunctionEnv):
    """One branch of an MCP env; subclass it, add `@tool` methods, set `session_scope`."""

    session_scope: ClassVar[SessionScope] = SessionScope.BRANCH
    """Whether each branch has its own server session or the K branches share one."""
    _session: McpSession | None = None

    @property
    def session(self) -> McpSession:
        """The branch's server session (set by the group before `setup()`)."""
        if self._session is None:
            raise RuntimeError(f"{type(self).__name__} has no MCP session yet (reset the group)")
        return self._session

    def attach(self, session: McpSession) -> None:
        """Give the branch its session (the group does this on reset)."""
        self._session = session

    async def setup(self) -> None:
        """Prepare the branch after its session opened, before `observation()` (e.g. load the
        task into the server with `call_server`); by default nothing."""

    async def call_server(
        self,
        name: str,
        arguments: Mapping[str, JsonValue] | None = None,
        *,
        timeout: float | None = None,
    ) -> McpResult:
        """Call a server tool from the env's own code; a failing server raises
        `McpServerError` (the group turns it into the step's `env_error`)."""
        return await self.session.call(name, arguments or {}, timeout=timeout)

    @classmethod
    async def connect(
        cls,
        server: McpServer,
        *,
        system_prompt: str,
        include: Sequence[str] | None = None,
        max_calls: int = 1,
        output_chars: int = 8000,
        forbid_unknown_arguments: bool = True,
    ) -> McpTools:
        """The env's protocol: the server's tools (listed once) and this class's `@tool`s."""
        return await McpTools.connect(
            server,
            system_prompt=system_prompt,
            local=cls.function_tools(),
            include=include,
            max_calls=max_calls,
            output_chars=output_chars,
            forbid_unknown_arguments=forbid_unknown_arguments,
        )

    @classmethod
    def protocol(cls, system_prompt: str, *, max_calls: int = 1) -> FunctionTools:
        """Not for MCP envs: their protocol needs the server's tools (`await cls.connect`)."""
        raise TypeError(f"{cls.__name__}.protocol(): use `await {cls.__name__}.connect(server)`")


def _render(result: object) -> str:
    if result is None:
        return ""
    return result if isinstance(result, str) else repr(result)


class McpEnvGroup:
    """An `EnvGroup` of K `McpEnv` branches of one task, with their server sessions."""

    def __init__(
        self, task: TaskInfo, size: int, make: Callable[[TaskInfo], McpEnv], tools: McpTools
    ) -> None:
        if size < 1:
            raise ValueError(f"group size must be >= 1, got {size}")
        self._task, self._size, self._make, self._tools = task, size, make, tools
        self._envs: list[McpEnv] = []
        self._sessions: list[McpSession] = []
        self._steps: list[EnvStep] = []
        self._closed = False

    @property
    def task(self) -> TaskInfo:
        """The task the branches play."""
        return self._task

    @property
    def size(self) -> int:
        """Number of branches K."""
        return self._size

    @property
    def sessions(self) -> tuple[McpSession, ...]:
        """The open server sessions (K for branch scope, one for group scope)."""
        return tuple(self._sessions)

    def _record(self, env: McpEnv, text: str, outputs: tuple[str, ...], ok: bool) -> EnvStep:
        return EnvStep(
            observation=text,
            score=env.score,
            done=env.done,
            won=env.won,
            admissible=ok,
            state_key=env.state_key(),
            outputs=outputs,
        )

    def _check_envs(self, envs: Sequence[McpEnv]) -> SessionScope:
        kinds = {type(env) for env in envs}
        if len(kinds) != 1:
            raise TypeError(f"McpEnvGroup: the branches must share one class, got {kinds}")
        (kind,) = kinds
        names = {t.name for t in kind.function_tools()}
        missing = [f.name for f in self._tools.local if f.name not in names]
        if missing:
            raise ValueError(
                f"McpEnvGroup: the protocol's local tools {missing} are not @tools of "
                f"{kind.__name__}; build the protocol with `await {kind.__name__}.connect(...)`"
            )
        return kind.session_scope

    async def _open(self, count: int) -> list[McpSession]:
        """Open `count` sessions concurrently; on any failure close them all and raise it."""

        async def one() -> McpSession:
            session = await McpSession.open(self._tools.server)
            self._sessions.append(session)  # close() finds it even if reset is interrupted
            listed = {t.name for t in session.tools}
            gone = [t.name for t in self._tools.remote if t.name not in listed]
            if gone:
                raise McpStartError(
                    f"MCP server {session.server.describe()} no longer lists the tools {gone} "
                    "of the protocol; connect again"
                )
            return session

        results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                await self._close_all()
                raise result
        return [r for r in results if isinstance(r, McpSession)]

    async def reset(self) -> list[EnvStep]:
        """Build K fresh branches and open their sessions (closing the previous ones); raises
        `McpStartError` (naming the command or URL) when a server does not start."""
        if self._closed:
            raise RuntimeError("McpEnvGroup is closed")
        await self._close_all()
        self._steps = []
        envs = [self._make(self._task) for _ in range(self._size)]
        self._envs = envs
        scope = self._check_envs(envs)
        sessions = await self._open(self._size if scope is SessionScope.BRANCH else 1)
        for index, env in enumerate(envs):
            env.attach(sessions[index if scope is SessionScope.BRANCH else 0])
        await asyncio.gather(*(env.setup() for env in envs))
        self._steps = [self._record(e, e.observation(), (), True) for e in envs]
        return list(self._steps)

    async def _run(self, branch: int, action: EnvAction) -> EnvStep:
        env = self._envs[branch]
        if isinstance(action, str):
            raise TypeError("McpEnvGroup takes tool calls, got a command string; use McpTools")
        local = {t.name: t.__get__(env) for t in type(env).function_tools()}
        outputs: list[str] = []
        ok = True
        for index, call in enumerate(action):
            if env.done or env.won:
                outputs.append(SKIPPED)
                continue
            try:
                function = local.get(call.name)
                if function is not None:
                    text = _render(await function.invoke(call))
                else:
                    arguments = self._tools.arguments(call)
                    result = await env.session.call(call.name, arguments)
                    text, ok = result.output, ok and not result.is_error
            except (McpServerError, ToolInfraError) as exc:  # the infrastructure's, not the model's
                error = str(exc) if isinstance(exc, McpServerError) else describe_exception(exc)
                outputs.append(f"Error: {exc}")
                outputs.extend([NOT_RUN] * (len(action) - index - 1))
                return EnvStep(observation=str(exc), error=error, outputs=tuple(outputs))
            except Exception as exc:
                ok = False
                text = f"Error: {type(exc).__name__}: {exc}"
            outputs.append(clip(text, self._tools.output_chars))
        return self._record(env, "\n\n".join(outputs), tuple(outputs), ok)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Run each live branch's calls in order (branches concurrently)."""
        if self._closed:
            raise RuntimeError("McpEnvGroup is closed")
        if not self._steps:
            raise RuntimeError("McpEnvGroup.step() called before reset()")
        if len(actions) != self._size:
            raise ValueError(f"expected {self._size} actions, got {len(actions)}")
        live = [
            (i, a) for i, a in enumerate(actions) if a is not None and not self._steps[i].finished
        ]
        results = await asyncio.gather(*(self._run(i, a) for i, a in live))
        for (i, _), step in zip(live, results, strict=True):
            self._steps[i] = step
        return list(self._steps)

    async def _close_all(self) -> None:
        envs, self._envs = self._envs, []
        sessions, self._sessions = self._sessions, []
        for env in envs:
            try:
                await env.close()
            except Exception as exc:
                log.warning("closing an MCP env branch failed: %s", exc)
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    async def close(self) -> None:
        """Close every branch and every session this group opened (stopping the stdio
        servers it started); idempotent."""
        self._closed = True
        await self._close_all()


@dataclass(frozen=True)
class McpEnvFactory:
    """An `EnvGroupFactory` of `McpEnvGroup`s: `make(task)` branches over `tools`' server."""

    tools: McpTools
    make: Callable[[TaskInfo], McpEnv]

    def __call__(self, task: TaskInfo, group_size: int) -> McpEnvGroup:
        """A group of `group_size` branches of `task` (sessions open on `reset()`)."""
        return McpEnvGroup(task, group_size, self.make, self.tools)
