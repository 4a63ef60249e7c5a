"""A real MCP server for the tests, written with the SDK's `MCPServer`.

Run over stdio (`python calc_server.py`) or streamable HTTP (`python calc_server.py --port N`).
Its state (a counter) lives in the process, so stdio sessions are isolated from each other and
HTTP sessions share it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer(
    "calc", instructions="A calculator. Add numbers with `add`.", log_level="WARNING"
)
COUNTER = [0]


class Point(BaseModel):
    x: int
    y: int


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def join(words: list[str], sep: str = " ") -> str:
    """Join words with a separator."""
    return sep.join(words)


@server.tool()
def point(x: int) -> Point:
    """A point with y = 2x (structured output)."""
    return Point(x=x, y=2 * x)


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b; dividing by zero is a tool error."""
    if b == 0:
        raise ToolError("division by zero")
    return a / b


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def count() -> int:
    """Add one to the server's counter and return it."""
    COUNTER[0] += 1
    return COUNTER[0]


@server.tool()
def crash() -> str:
    """Exit the server process at once (a crash mid-call)."""
    sys.stderr.write("calc server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    if args.port is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
