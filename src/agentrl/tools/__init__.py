"""Tool protocols: the textual contract between a model and an environment.

`protocol` holds the `ToolProtocol` contract and `parse_with_dialect`; `command` the
one-text-command `CommandTool` (ALFWorld, toy). Everything is re-exported here, so
`from agentrl.tools import CommandTool` keeps working.
"""

from agentrl.tools.command import CommandTool, StatusTexts
from agentrl.tools.protocol import CallChecker, ToolProtocol, ToolResult, parse_with_dialect

__all__ = [
    "CallChecker",
    "CommandTool",
    "StatusTexts",
    "ToolProtocol",
    "ToolResult",
    "parse_with_dialect",
]
