"""Tool protocols: the textual contract between a model and an environment.

`protocol` holds the `ToolProtocol` contract and `parse_with_dialect`; `command` the
one-text-command `CommandTool` (ALFWorld, toy); `functions` the `@tool` decorator (tools from
typed functions); `toolset` the `FunctionTools` protocol (one or parallel calls per turn);
`group` `FunctionEnv` / `FunctionEnvGroup` (an environment written as a
class of tools). Everything is re-exported here (`from agentrl.tools import CommandTool`).
"""

from agentrl.core.errors import ToolInfraError
from agentrl.tools.command import CommandTool, StatusTexts
from agentrl.tools.functions import FunctionTool, ToolArgumentError, tool
from agentrl.tools.group import FunctionEnv, FunctionEnvGroup, function_env_factory
from agentrl.tools.protocol import (
    CallChecker,
    CallsChecker,
    ToolProtocol,
    ToolResult,
    parse_with_dialect,
    tool_messages,
)
from agentrl.tools.toolset import FunctionTools

__all__ = [
    "CallChecker",
    "CallsChecker",
    "CommandTool",
    "FunctionEnv",
    "FunctionEnvGroup",
    "FunctionTool",
    "FunctionTools",
    "StatusTexts",
    "ToolArgumentError",
    "ToolInfraError",
    "ToolProtocol",
    "ToolResult",
    "function_env_factory",
    "parse_with_dialect",
    "tool",
    "tool_messages",
]
