"""`McpSession`: one live connection to an MCP server, through the SDK's `mcp.Client`.

The SDK's client runs in anyio task groups, whose cancel scopes must be entered and left in the
same task, while an env group is reset, stepped and closed from whatever tasks the rollout runs
it in. So each session has one owner task that enters `mcp.Client` (starting the stdio
subprocess or opening the HTTP session), lists the tools, then waits until `close()`; calls
are made from the caller's task. A call waits for its answer or for the owner to end (the
transport failed), whichever comes first, so a dead server is noticed at once.

What a call can raise is `McpServerError` only (an infrastructure failure): the server exited or
dropped the connection, did not answer within the call timeout, or answered with a JSON-RPC
error. A JSON-RPC `invalid params` error is the exception: the model sent arguments the server
refuses (after agentrl's own schema check), so it comes back as an error result the model sees.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import IO, TYPE_CHECKING, TextIO, cast

from agentrl.core.types import JsonObject, JsonValue
from agentrl.envs.mcp.config import McpServer, McpServerError, McpStartError, require_sdk
from agentrl.envs.mcp.results import McpResult, result_text
from agentrl.envs.mcp.schema import McpTool

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client import Transport
    from mcp_types import CallToolResult

__all__ = ["McpSession"]

log = logging.getLogger(__name__)

_CLOSE_SECONDS = 10.0
"""How long `close()` waits for the owner (the SDK bounds its own stdio shutdown to ~6 s)."""
_GRACE_SECONDS = 1.0
"""Extra time after the SDK's own per-call timeout before the call is abandoned."""
_STDERR_BYTES = 1500
_MAX_PAGES = 100


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _describe(exc: BaseException) -> str:
    """`Type: message` of an exception (of each distinct leaf of an exception group)."""
    texts = [f"{type(leaf).__name__}: {leaf}".rstrip(": ") for leaf in _leaves(exc)]
    return "; ".join(list(dict.fromkeys(texts))[:3])


def _tool(tool: object) -> McpTool:
    from mcp_types import Tool

    assert isinstance(tool, Tool)
    schema = cast(JsonObject, dict(tool.input_schema))
    return McpTool(name=tool.name, description=tool.description or "", input_schema=schema)


async def _list_tools(client: Client) -> tuple[McpTool, ...]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(_tool(t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


class McpSession:
    """One open session with an MCP server (for stdio: a subprocess agentrl started).

    Build it with `await McpSession.open(server)`; `close()` ends it (idempotent)."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self._tools: tuple[McpTool, ...] = ()
        self._instructions: str | None = None
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._failure: str | None = None
        self._closed = False
        self._stderr: IO[str] | None = None
        self._stderr_tail = ""

    @classmethod
    async def open(cls, server: McpServer) -> McpSession:
        """Start (stdio) or reach (HTTP) the server, finish the handshake and list its tools;
        raise `McpStartError` naming the command or URL when that fails or times out."""
        require_sdk()
        session = cls(server)
        await session._start()
        return session

    @property
    def tools(self) -> tuple[McpTool, ...]:
        """The tools the server listed when the session opened."""
        return self._tools

    @property
    def instructions(self) -> str | None:
        """The server's instructions text, if it sent one."""
        return self._instructions

    @property
    def failure(self) -> str | None:
        """Why the session is dead (the server exited or the connection dropped), else None."""
        return self._failure

    @property
    def alive(self) -> bool:
        """True while calls can be made."""
        return self._client is not None and self._failure is None and not self._closed

    def _read_stderr(self) -> str:
        """The end of the server's stderr (a stdio server whose stderr agentrl keeps)."""
        if self._stderr is None or self._stderr.closed:
            return self._stderr_tail
        fd = self._stderr.fileno()
        start = max(0, os.fstat(fd).st_size - _STDERR_BYTES)
        return os.pread(fd, _STDERR_BYTES, start).decode("utf-8", "replace")

    def _keep_stderr(self) -> None:
        self._stderr_tail = self._read_stderr()

    def _stderr_lines(self) -> str:
        """The server's last stderr lines, as a suffix for an error message."""
        lines = [line.strip() for line in self._read_stderr().splitlines() if line.strip()]
        return "; server stderr: " + " | ".join(lines[-6:]) if lines else ""

    def _precheck(self) -> None:
        command = self.server.command
        if command is None or "/" in command:
            return
        path = self.server.env.get("PATH", os.environ.get("PATH"))
        if shutil.which(command, path=path) is None:
            raise McpStartError(
                f"MCP server {self.server.describe()} did not start: command {command!r} "
                "was not found on PATH"
            )

    async def _start(self) -> None:
        self._precheck()
        self._ready = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(), name=f"mcp-session {self.server.name}")
        limit = self.server.connect_timeout
        try:
            await asyncio.wait(
                {self._ready, self._owner}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            await self.close()
            raise
        if self._ready.done() and not self._ready.cancelled():
            return
        if self._owner.done():
            reason = self._failure or "it ended before the handshake"
        else:
            reason = f"no handshake within {limit:g} s (connect_timeout){self._stderr_lines()}"
        await self.close()
        raise McpStartError(f"MCP server {self.server.describe()} did not start: {reason}")

    async def _transport(self, stack: AsyncExitStack) -> Transport:
        server = self.server
        if server.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            errlog: TextIO = sys.stderr
            if not server.show_stderr:
                file = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (the stack closes it)
                kept = stack.enter_context(file)
                stack.callback(self._keep_stderr)  # runs after the server stopped, before close
                self._stderr = kept
                errlog = cast(TextIO, kept)
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            return stdio_client(params, errlog=errlog)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert server.url is not None
        http = httpx2.AsyncClient(
            headers=dict(server.headers), timeout=httpx2.Timeout(30.0, read=300.0)
        )
        await stack.enter_async_context(http)
        return streamable_http_client(server.url, http_client=http)

    async def _own(self) -> None:
        """The owner task: hold the SDK client open until `close()` (or until it fails)."""
        from mcp import Client

        assert self._ready is not None
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(transport, mode=self.server.mode)
                await stack.enter_async_context(client)
                self._tools = await _list_tools(client)
                self._instructions = client.instructions
                self._client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if self._failure is None:
                self._failure = f"{_describe(exc)}{self._stderr_lines()}"
        finally:
            self._client = None
            if not self._ready.done():
                self._ready.cancel()
            if self._failure is None and not self._closed:
                self._failure = "the connection ended"

    def _dead(self, what: str) -> McpServerError:
        """Mark the session dead and build the error saying so."""
        if self._failure is None:
            self._failure = f"{what}{self._stderr_lines()}"
        return McpServerError(f"MCP server {self.server.describe()}: {self._failure}")

    async def call(
        self, name: str, arguments: Mapping[str, JsonValue], *, timeout: float | None = None
    ) -> McpResult:
        """Call tool `name`; the result (an error result included) or `McpServerError`.

        `timeout` overrides the server's `call_timeout` for this call."""
        server = self.server
        if self._closed:
            raise McpServerError(f"MCP server {server.describe()}: the session is closed")
        client = self._client
        if client is None or self._failure is not None or self._owner is None:
            raise self._dead("the server is not connected")
        limit = timeout if timeout is not None else server.call_timeout
        request = asyncio.ensure_future(
            client.call_tool(name, dict(arguments), read_timeout_seconds=limit)
        )
        wait = None if limit is None else limit + _GRACE_SECONDS
        try:
            done, _ = await asyncio.wait(
                {request, self._owner}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            request.cancel()
            raise
        if request not in done:
            request.cancel()
            await asyncio.wait({request}, timeout=_GRACE_SECONDS)
            if self._owner.done():
                raise self._dead(f"the connection dropped while tool {name!r} ran")
            raise McpServerError(
                f"MCP server {server.describe()}: tool {name!r} did not answer within "
                f"{limit:g} s (call_timeout)"
            )
        return self._answer(name, request, limit)

    def _answer(
        self, name: str, request: asyncio.Future[CallToolResult], limit: float | None
    ) -> McpResult:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

        where = f"MCP server {self.server.describe()}"
        if request.cancelled():
            raise self._dead(f"the connection dropped while tool {name!r} ran")
        exc = request.exception()
        if isinstance(exc, MCPError):
            if exc.code == INVALID_PARAMS:
                return McpResult(text=exc.message, is_error=True)
            if exc.code == REQUEST_TIMEOUT:
                raise McpServerError(
                    f"{where}: tool {name!r} did not answer within {limit:g} s (call_timeout)"
                )
            if exc.code == CONNECTION_CLOSED:
                raise self._dead(f"the server closed the connection while tool {name!r} ran")
            raise McpServerError(f"{where}: tool {name!r} failed with error {exc.code}: {exc}")
        if exc is not None:
            if self._owner is not None and self._owner.done():
                raise self._dead(f"the connection dropped while tool {name!r} ran")
            raise McpServerError(f"{where}: tool {name!r} failed: {_describe(exc)}")
        return result_text(request.result())

    async def close(self) -> None:
        """End the session: stop the stdio server (the SDK closes its stdin, then terminates
        and kills its process group) or end the HTTP session; idempotent."""
        if self._closed:
            return
        self._closed = True
        owner = self._owner
        if owner is None or owner.done():
            return
        if self._client is not None:
            self._stop.set()
        else:
            owner.cancel()
        done, _ = await asyncio.wait({owner}, timeout=_CLOSE_SECONDS)
        if not done:
            log.warning("MCP server %s did not shut down; cancelling", self.server.describe())
            owner.cancel()
            await asyncio.wait({owner}, timeout=_CLOSE_SECONDS)
