"""A tiny deterministic carry-the-object task for tests, tutorials and the CPU demo."""

from agentrl.envs.toy.env import ToyEnvGroup, ToyState, ToyTask, make_toy_group, toy_task, toy_tasks

__all__ = ["ToyEnvGroup", "ToyState", "ToyTask", "make_toy_group", "toy_task", "toy_tasks"]
