"""A tiny deterministic carry-the-object task for tests, tutorials and the CPU demo."""

from agentrl.envs.toy.env import ToyEnvGroup, ToyState, ToyTask, make_toy_group, toy_task, toy_tasks
from agentrl.envs.toy.tools import TOY_TOOL_NAME, toy_tool_protocol

__all__ = [
    "TOY_TOOL_NAME",
    "ToyEnvGroup",
    "ToyState",
    "ToyTask",
    "make_toy_group",
    "toy_task",
    "toy_tasks",
    "toy_tool_protocol",
]
