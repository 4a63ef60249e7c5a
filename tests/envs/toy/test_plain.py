"""The plain-command protocol and the uniform demonstration policy."""

from __future__ import annotations

import pytest

from agentrl.envs.toy import ToyEnvGroup, toy_tasks
from agentrl.envs.toy.plain import PlainCommands, uniform_command_policy
from agentrl.types import ParseErrorKind


def test_parse_reply_is_the_command() -> None:
    protocol = PlainCommands()
    assert protocol.parse("  Go to   Shelf 1 ").action == "go to shelf 1"
    assert protocol.parse("").error.kind is ParseErrorKind.EMPTY_ACTION  # type: ignore[union-attr]
    two_lines = protocol.parse("look\ninventory")
    assert two_lines.error is not None and two_lines.error.kind is ParseErrorKind.MULTILINE_ACTION
    cut = protocol.parse("go to", truncated=True)
    assert cut.error is not None and cut.error.kind is ParseErrorKind.TRUNCATED


async def test_uniform_policy_picks_listed_actions_from_the_first_message() -> None:
    (task,) = toy_tasks(1, seed=4)
    group = ToyEnvGroup(task, 1)
    (first,) = await group.reset()
    messages = PlainCommands().initial_messages(task, first, max_env_steps=8)
    prompt = "\n".join(m.content for m in messages)
    policy = uniform_command_policy(0)
    picks = {policy(prompt) for _ in range(60)}
    assert picks <= set(first.admissible_actions)
    assert len(picks) >= 3  # uniform, not always the first
    with pytest.raises(ValueError, match="no action list"):
        policy("nothing to choose from")
