"""Checks before a run starts that would otherwise let it "succeed" on nothing.

`check_token_budget` renders the first prompt of one game (one env reset, no sampling) and
raises `TokenBudgetError` when the trajectory token budget cannot hold it: every trajectory
would end before its first turn, and training would run zero-turn updates without a word.
"""

from __future__ import annotations

import contextlib

from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.rollout import RolloutConfig
from agentrl.tools import ToolProtocol

__all__ = ["TokenBudgetError", "check_token_budget", "first_prompt_length"]


class TokenBudgetError(ValueError):
    """The trajectory token budget is smaller than the first prompt."""


async def first_prompt_length(
    task: TaskInfo,
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    max_env_steps: int,
) -> int | None:
    """Tokens of `task`'s first prompt (None when the environment cannot be reset)."""
    env = env_factory(task, 1)
    try:
        try:
            steps = await env.reset()
        except Exception:  # the rollout records env failures itself
            return None
        if not steps or steps[0].error is not None:
            return None
        messages = protocol.initial_messages(task, steps[0], max_env_steps)
        return len(renderer.initial_prompt(messages, protocol.tools))
    finally:
        with contextlib.suppress(Exception):  # closing is best effort, as in the rollout
            await env.close()


async def check_token_budget(
    task: TaskInfo,
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig,
) -> None:
    """Raise `TokenBudgetError` if `task`'s first prompt does not fit the trajectory budget."""
    length = await first_prompt_length(
        task,
        env_factory=env_factory,
        renderer=renderer,
        protocol=protocol,
        max_env_steps=config.max_env_steps,
    )
    if length is not None and length >= config.max_trajectory_tokens:
        raise TokenBudgetError(
            f"--max-trajectory-tokens {config.max_trajectory_tokens} is smaller than the first "
            f"prompt of game {task.task_id} ({length} tokens: system prompt, tools and first "
            "observation), so no trajectory would get a single turn; raise it to at least "
            f"{length + config.max_assistant_tokens} (prompt + --max-assistant-tokens "
            f"{config.max_assistant_tokens})"
        )
