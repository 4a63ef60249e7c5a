"""The planner baseline as an evaluation player: ALFWorld games played by `PlannerPolicy`'s plan,
sent as tool calls through the rollout engine (moved here from `agentrl.evaluation.run`; the old
path still works)."""

from __future__ import annotations

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.alfworld.planner import PlannerPolicy, PlanSource
from agentrl.rollout import PlayFn, ReplySampler, RolloutConfig, keyed_rollout, model_player
from agentrl.tools import CommandTool
from agentrl.tools.command import PlainCommandProtocol

__all__ = ["planner_player"]


def planner_player(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: CommandTool | PlainCommandProtocol,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
    source: PlanSource = "auto",
) -> PlayFn:
    """ALFWorld games played by the planner baseline, as tool calls through the rollout engine.

    Each game's plan comes from `agentrl.envs.alfworld.PlannerPolicy` (the game's stored
    walkthrough, the expert, or Fast Downward); every plan step is sent as the protocol's tool
    call (or, with a `PlainCommandProtocol`, as the command itself), so statuses, rewards and
    records are exactly those a model would get. The replies follow the plan turn by turn
    whatever the prompts hold (`ReplySampler`: under a context window too); without a base
    sampling seed in `rollout`, seed 0 keys the requests (`keyed_rollout`).
    """
    keyed = keyed_rollout(rollout)

    async def play(task: TaskInfo) -> TrajectoryGroup:
        policy = PlannerPolicy(source)
        await policy.start(task, keyed.group_size)
        write = renderer.dialect
        replies = [protocol.call_text(action, dialect=write) for action in policy.plan]
        look = protocol.call_text("look", dialect=write)
        sampler = ReplySampler(renderer, replies, look, rollout=keyed, group_id=task.task_id)
        player = model_player(
            env_factory=env_factory,
            sampler=sampler,
            renderer=renderer,
            protocol=protocol,
            rollout=keyed,
            reward_fn=reward_fn,
        )
        return await player(task)

    return play
