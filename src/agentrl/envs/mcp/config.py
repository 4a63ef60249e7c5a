"""Records of the MCP plug-in: where a server is (`McpServer`), who shares a session
(`SessionScope`) and the two errors a server can cause (`McpServerError`, `McpStartError`)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from agentrl._optional import require

__all__ = [
    "McpServer",
    "McpServerError",
    "McpStartError",
    "McpTransport",
    "SessionScope",
    "require_sdk",
]

EXTRA = "mcp"
"""The agentrl extra that installs the MCP SDK (`pip install 'agentrl[mcp]'`)."""


def require_sdk() -> None:
    """Check that the `mcp` SDK is importable; raise `MissingExtraError` naming the extra."""
    require("mcp", EXTRA, "MCP servers as tools (agentrl.envs.mcp)")


class McpServerError(RuntimeError):
    """The server failed (exited, lost the connection, timed out, answered with a protocol
    error): an infrastructure failure, reported as `EnvStep.error` (`env_error`), never as a
    tool result the model is scored on."""


class McpStartError(McpServerError):
    """The server did not start or did not answer the handshake (the text names the command or
    the URL, and the server's last stderr lines when there are any)."""


class McpTransport(StrEnum):
    """How agentrl talks to a server."""

    STDIO = "stdio"
    """agentrl starts `command args...` as a subprocess and speaks over its stdin/stdout."""
    HTTP = "http"
    """agentrl connects to a running server's streamable-HTTP endpoint (`url`)."""


class SessionScope(StrEnum):
    """Which branches share one server session (declared by the env, `McpEnv.session_scope`)."""

    BRANCH = "branch"
    """Every branch opens its own session (a stdio server: its own process), so branches cannot
    see each other's server state; a crash ends only that branch."""
    GROUP = "group"
    """The K branches of a group share one session (one process for stdio): cheaper, but server
    state is shared, and a crash ends every branch of the group that calls the server again."""


@dataclass(frozen=True)
class McpServer:
    """One MCP server: a command to start (stdio) or the URL of a running server (streamable
    HTTP), with its timeouts. Build it with `McpServer.stdio(...)` or `McpServer.http(...)`."""

    name: str = "mcp"
    """A label for errors and logs."""
    command: str | None = None
    """The executable to start (stdio transport)."""
    args: tuple[str, ...] = ()
    """The command's arguments."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables of the subprocess; the SDK passes only a safe base set
    (HOME, PATH, SHELL, TERM, USER, LOGNAME) besides these."""
    cwd: str | None = None
    """The subprocess's working directory (default: the current one)."""
    url: str | None = None
    """The streamable-HTTP endpoint, e.g. `http://127.0.0.1:8000/mcp` (HTTP transport)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers sent with every request (e.g. an `Authorization` header)."""
    call_timeout: float | None = 60.0
    """Seconds one tool call may take before it is an `env_error` (None: no limit)."""
    connect_timeout: float = 30.0
    """Seconds to start the server, finish the handshake and list the tools."""
    mode: str = "auto"
    """The SDK's protocol negotiation (`mcp.Client(mode=...)`): `auto` probes the newest
    protocol and falls back to the `initialize` handshake; `legacy` forces the handshake."""
    show_stderr: bool = False
    """Pass a stdio server's stderr through to agentrl's stderr; by default it is kept in a
    temporary file and its last lines are quoted in start and crash errors."""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("McpServer needs exactly one of `command` (stdio) and `url` (HTTP)")
        if self.command is not None and not self.command.strip():
            raise ValueError("McpServer.command is empty")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"McpServer.url must be an http(s) URL, got {self.url!r}")
        if self.call_timeout is not None and self.call_timeout <= 0:
            raise ValueError(f"McpServer.call_timeout must be > 0, got {self.call_timeout}")
        if self.connect_timeout <= 0:
            raise ValueError(f"McpServer.connect_timeout must be > 0, got {self.connect_timeout}")

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        call_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        mode: str = "auto",
        show_stderr: bool = False,
    ) -> McpServer:
        """A server agentrl starts as `command *args` and talks to over stdin/stdout."""
        return cls(
            name=name or command.rsplit("/", 1)[-1],
            command=command,
            args=tuple(args),
            env=dict(env or {}),
            cwd=cwd,
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            mode=mode,
            show_stderr=show_stderr,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        call_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        mode: str = "auto",
    ) -> McpServer:
        """A running server reached at its streamable-HTTP endpoint `url`."""
        return cls(
            name=name or url,
            url=url,
            headers=dict(headers or {}),
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            mode=mode,
        )

    @property
    def transport(self) -> McpTransport:
        """stdio when a command is set, else HTTP."""
        return McpTransport.STDIO if self.command is not None else McpTransport.HTTP

    def describe(self) -> str:
        """The server as errors name it, e.g. `'calc' (command: python calc.py)`."""
        if self.command is not None:
            where = "command: " + shlex.join([self.command, *self.args])
        else:
            where = f"url: {self.url}"
        return f"{self.name!r} ({where})"
