"""The exploring ALFWorld expert played through the real rollout engine (tests only)."""

from __future__ import annotations

from typing import Any

from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.alfworld.explorer import ExplorerNoise, SearchOrder, explorer_policy


async def explorer_episodes(
    tasks: list[TaskInfo],
    factory: EnvGroupFactory,
    protocol: Any,
    order: SearchOrder,
    tokenizer: Any,
    noise: ExplorerNoise | None = None,
) -> list[TrajectoryGroup]:
    """One explorer episode of each task (up to 50 steps, with `noise`'s mistakes) through
    `protocol`, rendered with `tokenizer` (byte-level budgets: nothing is cut)."""
    from agentrl.chat import ChatRenderer
    from agentrl.rollout import RolloutConfig, rollout_batch
    from agentrl.testing import PolicySampler

    return await rollout_batch(
        tasks,
        env_factory=factory,
        sampler=PolicySampler(tokenizer, explorer_policy(protocol.call_text, order, noise)),
        renderer=ChatRenderer(tokenizer, protocol.tools),
        protocol=protocol,
        config=RolloutConfig(
            group_size=1,
            max_env_steps=50,
            max_assistant_tokens=512,
            max_trajectory_tokens=131_072,
        ),
        max_concurrent_groups=len(tasks),
    )
