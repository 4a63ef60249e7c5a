"""MCP servers as tools: an agentrl environment whose tools come from a Model Context Protocol
server (the official `mcp` SDK, `pip install 'agentrl[mcp]'`), over stdio or streamable HTTP.

    server = McpServer.stdio(sys.executable, "calc_server.py")
    protocol = await CalcEnv.connect(server, system_prompt="...")  # lists the tools once
    factory = McpEnvFactory(protocol, CalcEnv)                      # an EnvGroupFactory

`McpServer` says where the server is; `McpTools` is the tool protocol (the server's tools plus
the env's local `@tool`s); `McpEnv` is the branch a user subclasses (its local tools, such as
`submit`, decide `done` and `won`); `McpEnvGroup` owns the server sessions (one per branch or
one per group, `SessionScope`). A crashed, hung or unreachable server is an `env_error`, never
a reward. Importing this package does not import the SDK; using it without the SDK raises
`MissingExtraError`. See docs/mcp.md.
"""

from agentrl.envs.mcp.config import (
    McpServer,
    McpServerError,
    McpStartError,
    McpTransport,
    SessionScope,
)
from agentrl.envs.mcp.env import McpEnv, McpEnvFactory, McpEnvGroup
from agentrl.envs.mcp.results import McpResult
from agentrl.envs.mcp.schema import McpTool
from agentrl.envs.mcp.session import McpSession
from agentrl.envs.mcp.toolset import McpTools

__all__ = [
    "McpEnv",
    "McpEnvFactory",
    "McpEnvGroup",
    "McpResult",
    "McpServer",
    "McpServerError",
    "McpSession",
    "McpStartError",
    "McpTool",
    "McpTools",
    "McpTransport",
    "SessionScope",
]
