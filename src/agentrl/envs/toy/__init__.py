"""Tiny deterministic tasks: carry-the-object (tests, tutorials), fetch (the learning benchmark)
and vault (remember a code told once; a `FunctionEnv` that also lists its commands)."""

from agentrl.envs.toy.env import ToyEnvGroup, ToyState, ToyTask, make_toy_group, toy_task, toy_tasks
from agentrl.envs.toy.fetch import (
    FetchEnvGroup,
    FetchTask,
    fetch_group_factory,
    fetch_task,
    fetch_tasks,
    random_valid_success,
)
from agentrl.envs.toy.tools import TOY_TOOL_NAME, toy_tool_protocol
from agentrl.envs.toy.vault import (
    VaultEnv,
    VaultTask,
    vault_group_factory,
    vault_protocol,
    vault_random_success,
    vault_task,
    vault_tasks,
)

__all__ = [
    "TOY_TOOL_NAME",
    "FetchEnvGroup",
    "FetchTask",
    "ToyEnvGroup",
    "ToyState",
    "ToyTask",
    "VaultEnv",
    "VaultTask",
    "fetch_group_factory",
    "fetch_task",
    "fetch_tasks",
    "make_toy_group",
    "random_valid_success",
    "toy_task",
    "toy_tasks",
    "toy_tool_protocol",
    "vault_group_factory",
    "vault_protocol",
    "vault_random_success",
    "vault_task",
    "vault_tasks",
]
