"""Fixtures of the MCP tests: the real calc server (`calc_server.py`) over stdio and over
streamable HTTP on 127.0.0.1, and a small example env (`CalcEnv`, whose `submit` decides
`won`)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrl.envs.mcp import McpServer, McpTools, SessionScope
from agentrl.envs.mcp.env import McpEnv
from agentrl.tools import tool
from agentrl.types import TaskInfo

CALC = Path(__file__).with_name("calc_server.py")
TASK = TaskInfo(task_id="calc/17+25", description="What is 17 + 25? Use the tools, then submit.")
SYSTEM = "You are a careful calculator agent. Call one tool per turn."


def calc_stdio(call_timeout: float | None = 20.0) -> McpServer:
    """The calc server started over stdio by the env group."""
    return McpServer.stdio(sys.executable, str(CALC), name="calc", call_timeout=call_timeout)


class CalcEnv(McpEnv):
    """One branch: the server's calculator tools and a local `submit`."""

    def __init__(self, task: TaskInfo) -> None:
        a, b = task.task_id.removeprefix("calc/").split("+")
        self.task, self.expected = task, int(a) + int(b)
        self.submitted: list[int] = []

    def observation(self) -> str:
        """The question."""
        return self.task.description

    def state_key(self) -> str:
        """The answers submitted so far."""
        return f"{self.task.task_id}:{self.submitted}"

    @tool
    def submit(self, answer: int) -> str:
        """Submit the final answer and end the episode.

        Args:
            answer: The result.
        """
        self.submitted.append(answer)
        self.done = True
        self.won = answer == self.expected
        self.score = 1.0 if self.won else 0.0
        return "Correct." if self.won else "Incorrect."


class SharedCalcEnv(CalcEnv):
    """The same env with one server session shared by the group's branches."""

    session_scope = SessionScope.GROUP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class HttpServer:
    """A calc server process serving streamable HTTP."""

    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, call_timeout: float | None = 20.0) -> McpServer:
        return McpServer.http(self.url, name="calc-http", call_timeout=call_timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


def start_http_server() -> HttpServer:
    """Start the calc server on a free port and wait until it accepts connections."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(CALC), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the calc HTTP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return HttpServer(process, port)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the calc HTTP server did not answer within 30 s")


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    """One calc server over streamable HTTP for the module; killed after."""
    server = start_http_server()
    try:
        yield server
    finally:
        server.stop()


def process_gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


async def connect_calc(server: McpServer, env: type[CalcEnv] = CalcEnv) -> McpTools:
    return await env.connect(server, system_prompt=SYSTEM)


@pytest.fixture(scope="session")
def calc_tools() -> McpTools:
    """The calc server's protocol with `CalcEnv`'s `submit`, listed once over stdio."""
    pytest.importorskip("mcp")
    return asyncio.run(connect_calc(calc_stdio()))
