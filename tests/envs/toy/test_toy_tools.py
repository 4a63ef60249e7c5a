"""The toy tool protocol drives the toy environment with the same generic class."""

from __future__ import annotations

from agentrl.envs.toy import ToyEnvGroup, toy_tasks, toy_tool_protocol
from agentrl.tools import CommandTool, ToolProtocol


async def test_toy_protocol_lists_the_env_actions() -> None:
    protocol = toy_tool_protocol()
    assert isinstance(protocol, CommandTool) and isinstance(protocol, ToolProtocol)
    task = toy_tasks(1)[0]
    group = ToyEnvGroup(task, 1)
    (first,) = await group.reset()
    _, user = protocol.initial_messages(task, first, max_env_steps=8)
    for action in first.admissible_actions:
        assert f"\n{action}" in user.content
    parsed = protocol.parse(protocol.call_text(first.admissible_actions[0]))
    (after,) = await group.step([parsed.action])
    assert after.admissible
    await group.close()
