"""The toy environment's tool protocol: one tool, `toy_step(action: str)`."""

from __future__ import annotations

from agentrl.tools import CommandTool

__all__ = ["TOY_TOOL_NAME", "toy_tool_protocol"]

TOY_TOOL_NAME = "toy_step"


def toy_tool_protocol(*, include_admissible: bool = True) -> CommandTool:
    """The `toy_step` protocol for `ToyEnvGroup` (carry one object to a target)."""
    return CommandTool(
        name=TOY_TOOL_NAME,
        description=(
            "Run one command in a small room. Command forms: go to PLACE; "
            "take OBJECT from PLACE; move OBJECT to PLACE; drop OBJECT; look; inventory."
        ),
        system_prompt=(
            f"You move objects around a small room by calling the {TOY_TOOL_NAME} tool. "
            "Make exactly one tool call per turn, at the end of your reply, and copy names "
            "such as 'apple 1' exactly. Never declare the task complete yourself."
        ),
        parameter="action",
        include_admissible=include_admissible,
    )
