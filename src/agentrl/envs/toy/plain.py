"""A plain-command protocol for tiny models: the reply is the command itself, no tool markup.

A randomly initialised tiny model never writes a valid tool call, so every group would be
degenerate (all rewards equal, no signal). With this protocol the format is one short line,
learnable from a few supervised demonstrations; which commands are *executable* is then left
for reinforcement learning to discover. Used by the learning test and the estimator ablation.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from agentrl.core.types import EnvStep, JsonObject, Message, ParsedAction, ParseErrorKind, TaskInfo
from agentrl.envs.toy.tools import toy_tool_protocol
from agentrl.tools import ToolResult

__all__ = ["ACTIONS_HEADING", "PlainCommands", "uniform_command", "uniform_command_policy"]

ACTIONS_HEADING = "Available actions (copy one exactly):"


class PlainCommands:
    """A `ToolProtocol` whose reply is one command, verbatim (the toy's texts otherwise)."""

    tools: tuple[JsonObject, ...] = ()
    system_prompt = "Reply with one command copied exactly from the available actions."

    def __init__(self) -> None:
        self._toy = toy_tool_protocol()

    def initial_messages(
        self, task: TaskInfo, first_step: EnvStep, max_env_steps: int
    ) -> list[Message]:
        """The toy's first user message under a plain-command system prompt."""
        _, user = self._toy.initial_messages(task, first_step, max_env_steps)
        return [Message(role="system", content=self.system_prompt), user]

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """The whole reply is the command; a cut, empty or multi-line reply is invalid."""
        text = " ".join(assistant_text.split()).lower()
        if truncated:
            return ParsedAction.failure(ParseErrorKind.TRUNCATED, "reply cut at the limit")
        if not text:
            return ParsedAction.failure(ParseErrorKind.EMPTY_ACTION, "empty reply")
        if "\n" in assistant_text.strip():
            return ParsedAction.failure(ParseErrorKind.MULTILINE_ACTION, "several lines")
        return ParsedAction(action=text)

    def tool_message(self, result: ToolResult) -> Message:
        """The toy's tool message (status, step counter, observation, actions)."""
        return self._toy.tool_message(result)


def uniform_command(prompt_text: str, rng: random.Random) -> str:
    """A uniformly random command from the prompt's last action list (a keyed policy, for
    `agentrl.testing.KeyedPolicySampler`)."""
    _, heading, block = prompt_text.rpartition(ACTIONS_HEADING)
    actions = re.findall(r"^([a-z][^\n<]*)", block, flags=re.MULTILINE) if heading else []
    if not actions:
        raise ValueError("no action list found in the prompt")
    choice: str = rng.choice(actions)
    return choice


def uniform_command_policy(seed: int) -> Callable[[str], str]:
    """A demonstration policy: a uniformly random command from the prompt's last action list,
    drawn from one generator seeded by `seed` in call order."""
    rng = random.Random(seed)

    def policy(prompt_text: str) -> str:
        return uniform_command(prompt_text, rng)

    return policy
