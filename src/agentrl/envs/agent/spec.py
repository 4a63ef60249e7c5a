"""`SPEC` (entry point `agent`): the tasks of an agent written without agentrl, read from its
module. The agent itself plays them through the gateway (`agentrl.gateway.AgentPlayer`), so the
env has no env group and no tool protocol of its own: the agent brings its tools.

The module of `--agent MODULE:FUNCTION` defines `TASKS`: a list of `TaskInfo`, of task texts
(each becomes a `train` task whose description is the text), or of dicts with TaskInfo's fields
(`task_id`, `description`, `task_type`, `split`)."""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.config import CommonConfig
from agentrl.config.envspec import EnvSpec
from agentrl.config.loading import load_object
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.tools import ToolProtocol

__all__ = ["SPEC", "agent_tasks"]

TASKS_NAME = "TASKS"


def _task(item: object, index: int, where: str) -> TaskInfo:
    if isinstance(item, TaskInfo):
        return item
    if isinstance(item, str):
        return TaskInfo(task_id=f"task-{index:04d}", description=item)
    if isinstance(item, dict):
        try:
            return TaskInfo(**{"task_id": f"task-{index:04d}", **item})
        except TypeError as exc:
            raise ValueError(f"{where}[{index}]: {exc}") from None
    raise ValueError(
        f"{where}[{index}]: want a TaskInfo, a str or a dict, got {type(item).__name__}"
    )


def agent_tasks(agent: str) -> list[TaskInfo]:
    """The `TASKS` of the module `agent` (`MODULE:FUNCTION`) names."""
    module = agent.rpartition(":")[0]
    where = f"{module}:{TASKS_NAME}"
    items = load_object(where, "--agent")
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise ValueError(f"{where} must be a non-empty list of tasks")
    return [_task(item, i, where) for i, item in enumerate(items)]


def _tasks(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    progress: bool = False,
) -> list[TaskInfo]:
    agent = getattr(config, "agent", None)  # a training field: eval has no agent to run
    if not isinstance(agent, str):
        raise ValueError("--env agent needs --agent MODULE:FUNCTION (the agent to train)")
    tasks = agent_tasks(agent)
    out: list[TaskInfo] = []
    for split in splits:
        chosen = [t for t in tasks if t.split == split]
        if not chosen:
            raise ValueError(f"{agent}: TASKS has no task of split {split!r}")
        out.extend(chosen[:limit_per_split] if limit_per_split else chosen)
    return out


def _no_group(config: CommonConfig) -> EnvGroupFactory:
    raise ValueError(
        "the `agent` env has no environment of its own: its tasks are played by the agent "
        "--agent names, through the gateway (agentrl train --env agent --agent MODULE:FUNCTION)"
    )


def _no_protocol(config: CommonConfig) -> ToolProtocol:
    raise ValueError("the `agent` env has no tool protocol: the agent brings its own tools")


SPEC = EnvSpec(
    name="agent",
    summary="tasks of an agent written without agentrl (--agent MODULE:FUNCTION), via the gateway",
    splits=("train", "valid_seen", "valid_unseen"),
    tasks=_tasks,
    group_factory=_no_group,
    tool_protocol=_no_protocol,
    config_fields=("agent",),
)
