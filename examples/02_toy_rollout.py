"""Env + ToolProtocol + Rollout + AdvantageEstimator: one group of the toy game, by script.

A `ScriptedSampler` stands in for the model (no weights needed): branch 0 plays the winning
plan, branch 1 wastes a turn without a tool call and then breaks the object. The rollout
engine renders exact token prompts with a real Qwen tokenizer, steps the toy environment,
scores each trajectory and we turn the group into advantages and training datums.

Run: python examples/02_toy_rollout.py
"""

import asyncio

from agentrl import ChatRenderer, GroupMean, RolloutConfig, build_datums, rollout_group
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.store.records import TrajectoryRecord
from agentrl.testing import ScriptedSampler

tokenizer = build_qwen_tokenizer()  # real Qwen BPE, built offline from dashscope's vocabulary
protocol = toy_tool_protocol()  # the ToolProtocol: one tool, toy_step(action)
renderer = ChatRenderer(tokenizer, protocol.tools)
task = toy_tasks(1)[0]
print("task:", task.description)

call = protocol.call_text  # the tool-call text a model would write
plan = ["go to shelf 1", "take key 1 from shelf 1", "go to bin 1", "move key 1 to bin 1"]
scripts = [[call(a) for a in plan], ["Done!", call(plan[0]), call(plan[1]), call("drop key 1")]]

group = asyncio.run(
    rollout_group(
        task,
        env_factory=make_toy_group,  # the Env: an EnvGroupFactory
        sampler=ScriptedSampler(tokenizer, scripts),
        renderer=renderer,
        protocol=protocol,
        config=RolloutConfig(group_size=2, max_env_steps=10),
    )
)
advantages = GroupMean().estimate([group])  # reward - mean(group rewards)
datums = build_datums([group], advantages)
for trajectory, per_turn in zip(group.trajectories, advantages.groups[0].per_turn, strict=True):
    record = TrajectoryRecord.from_trajectory(trajectory)
    statuses = [turn.status.value for turn in record.turns]
    print(
        f"branch {trajectory.branch}: {trajectory.stop_reason.value}, reward "
        f"{trajectory.reward:+.2f}, advantage {per_turn[0]:+.2f}, turns {statuses}"
    )
for datum in datums:
    print(f"datum: {len(datum)} tokens, {datum.num_assistant_tokens} trained (assistant) tokens")
