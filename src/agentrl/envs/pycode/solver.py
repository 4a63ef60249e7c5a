"""The solver baseline: a scripted policy that writes each task's reference program.

Turn 1 calls `run_python` with the task's reference code (it prints `ANSWER: <value>`); the
next turn submits the value the interpreter printed, as read back from the prompt. It plays
through the rollout engine like a model, so its records, statuses and rewards are those a
model would get; it measures the environment's ceiling (about 100% won).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo, ToolCall, TrajectoryGroup
from agentrl.envs.pycode.families import Problem
from agentrl.envs.pycode.tasks import problem_for
from agentrl.rollout import RolloutConfig, model_player
from agentrl.testing import PolicySampler
from agentrl.tools import FunctionTools

__all__ = ["solver_player", "solver_policy"]

ANSWER_LINE = re.compile(r"^ANSWER: (.*)$", re.MULTILINE)


def solver_policy(
    problem: Problem, protocol: FunctionTools, renderer: ChatRenderer
) -> Callable[[str], str]:
    """The reply to a prompt text: run the reference code, then submit what it printed."""

    def policy(prompt: str) -> str:
        printed = ANSWER_LINE.findall(prompt)
        if printed:
            call = ToolCall("submit", {"answer": printed[-1].strip()})
        else:
            call = ToolCall("run_python", {"code": problem.code})
        return protocol.call_text(call, dialect=renderer.dialect)

    return policy


def solver_player(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: FunctionTools,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> Callable[[TaskInfo], Awaitable[TrajectoryGroup]]:
    """pycode tasks played by the solver baseline through the rollout engine."""

    async def play(task: TaskInfo) -> TrajectoryGroup:
        policy = solver_policy(problem_for(task.task_id), protocol, renderer)
        player = model_player(
            env_factory=env_factory,
            sampler=PolicySampler(renderer.tokenizer, policy),
            renderer=renderer,
            protocol=protocol,
            rollout=rollout,
            reward_fn=reward_fn,
        )
        return await player(task)

    return play
