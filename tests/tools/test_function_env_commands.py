"""One `FunctionEnv`, both protocols: listed commands (`admissible_actions()`) reported in
`EnvStep.admissible_actions` and run from a plain-command protocol, tool calls as before."""

from __future__ import annotations

import asyncio
import random

import pytest

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import KeyedPolicySampler
from agentrl.tokenizer import build_qwen_tokenizer
from agentrl.tools import FunctionEnv, FunctionEnvGroup, ToolResult, tool
from agentrl.tools.command import PlainCommandProtocol
from agentrl.types import EnvStep, ParsedAction, StopReason, TaskInfo, ToolCall, TurnStatus


class Lamp(FunctionEnv):
    """Switch the lamp on in the colour the task names, then leave."""

    def __init__(self, task: TaskInfo) -> None:
        self.colour = task.task_id.split("-")[1]
        self.lit: str | None = None

    def observation(self) -> str:
        return f"Light the lamp {self.colour}."

    def state_key(self) -> str:
        return f"{self.lit}|{self.done}"

    def admissible_actions(self) -> tuple[str, ...]:
        if self.lit is None:
            return ("light red", "light Green")
        return ("leave",)

    @tool
    def light(self, colour: str) -> str:
        """Light the lamp."""
        if self.lit is not None:
            raise ValueError("already lit")
        self.lit = colour.lower()
        return f"The lamp glows {self.lit}."

    @tool
    def leave(self) -> str:
        """Leave the room (ends the episode)."""
        self.done = True
        self.won = self.lit == self.colour
        self.score = float(self.won)
        return "Bye."

    @tool
    def paint(self, colour: str, coats: int) -> str:
        """Two parameters: not a default command."""
        return "painted"


class Silent(FunctionEnv):
    """Lists no commands: takes tool calls only."""

    @tool
    def wait(self) -> str:
        """Wait."""
        return "..."


TASK = TaskInfo("lamp-green", description="light the lamp.")


def _run(group: FunctionEnvGroup, *turns: list[object]) -> list[list[EnvStep]]:
    async def go() -> list[list[EnvStep]]:
        steps = [await group.reset()]
        for actions in turns:
            steps.append(await group.step(actions))  # type: ignore[arg-type]
        await group.close()
        return steps

    return asyncio.run(go())


def test_listed_commands_are_reported_and_run_as_calls() -> None:
    first, lit, left = _run(
        FunctionEnvGroup(TASK, 2, Lamp),
        ["LIGHT   green", (ToolCall("light", {"colour": "green"}),)],
        ["leave", (ToolCall("leave", {}),)],
    )
    assert first[0].admissible_actions == ("light red", "light Green")
    by_text, by_call = lit
    assert by_text.admissible and by_text.observation == "The lamp glows green."
    assert by_text.outputs == () and by_call.outputs == ("The lamp glows green.",)
    assert by_text.admissible_actions == by_call.admissible_actions == ("leave",)
    assert by_text.state_key == by_call.state_key == "green|False"
    assert all(s.won and s.done and s.admissible_actions == () for s in left)


def test_an_unlisted_command_runs_nothing_and_is_not_admissible() -> None:
    _, (wrong, called) = _run(
        FunctionEnvGroup(TASK, 2, Lamp),
        ["leave", (ToolCall("leave", {}),)],  # `leave` is a tool, but not listed yet
    )
    assert not wrong.admissible and "not one of the available actions" in wrong.observation
    assert not wrong.done and wrong.admissible_actions == ("light red", "light Green")
    assert called.admissible and called.done  # a tool call is not checked against the list


def test_default_command_reading() -> None:
    lamp = Lamp(TASK)
    assert lamp.command_call("light Green") == ToolCall("light", {"colour": "Green"})
    assert lamp.command_call("leave") == ToolCall("leave", {})
    with pytest.raises(ValueError, match="takes no argument"):
        lamp.command_call("leave now")
    with pytest.raises(ValueError, match="names no tool"):
        lamp.command_call("dance")
    with pytest.raises(ValueError, match=r"override Lamp\.command_call"):
        lamp.command_call("paint red 2")


def test_an_env_listing_no_commands_takes_calls_only() -> None:
    group = FunctionEnvGroup(TaskInfo("s"), 1, lambda task: Silent())
    first, step = _run(group, [(ToolCall("wait", {}),)])
    assert first[0].admissible_actions == () and step[0].outputs == ("...",)
    with pytest.raises(TypeError, match=r"admissible_actions\(\)"):
        _run(FunctionEnvGroup(TaskInfo("s"), 1, lambda task: Silent()), ["wait"])


def test_plain_command_protocol_messages() -> None:
    protocol = PlainCommandProtocol()
    first = EnvStep("Light the lamp green.", admissible_actions=("light red", "leave"))
    system, user = protocol.initial_messages(TASK, first, 4)
    assert system.content == protocol.system_prompt and protocol.tools == ()
    assert user.content.split("\n") == [
        "Task: light the lamp.",
        "Step 0 of 4.",
        "Available actions (copy one exactly):",
        "light red",
        "leave",
        "Observation:",
        "Light the lamp green.",
    ]
    assert protocol.parse("  Light   Red ").action == "light red"
    assert not protocol.parse("a\nb").ok and not protocol.parse("").ok
    assert not protocol.parse("light red", truncated=True).ok
    done = EnvStep("Bye.", done=True, won=True)
    won = protocol.tool_message(ToolResult(TurnStatus.WON, done, ParsedAction("leave"), 2, 4))
    assert won.role == "tool" and won.content.split("\n")[1:] == [
        "Step 2 of 4.",
        "Observation:",
        "Bye.",
    ]


def _lamp_policy(prompt_text: str, rng: random.Random) -> str:
    """Light the colour the first message names (found in the prompt), then leave."""
    colour = prompt_text.split("Light the lamp ", 1)[1].split(".", 1)[0]
    return "leave" if "glows" in prompt_text else f"light {colour}"


def _lamp_tool_policy(prompt_text: str, rng: random.Random) -> str:
    protocol = Lamp.protocol("Light the lamp.")
    reply = _lamp_policy(prompt_text, rng)
    name, _, colour = reply.partition(" ")
    return protocol.call_text(ToolCall(name, {"colour": colour} if colour else {}))


@pytest.mark.parametrize("plain", [True, False], ids=["plain-commands", "tool-calls"])
def test_one_env_serves_both_protocols_through_the_rollout_engine(plain: bool) -> None:
    tokenizer = build_qwen_tokenizer()
    protocol = PlainCommandProtocol() if plain else Lamp.protocol("Light the lamp.")
    policy = _lamp_policy if plain else _lamp_tool_policy
    group = asyncio.run(
        rollout_group(
            TASK,
            env_factory=lambda task, size: FunctionEnvGroup(task, size, Lamp),
            sampler=KeyedPolicySampler(tokenizer, policy),
            renderer=ChatRenderer(tokenizer, protocol.tools),
            protocol=protocol,
            config=RolloutConfig(
                group_size=2, max_env_steps=4, sampling=SamplingParams(temperature=1.0, seed=1)
            ),
        )
    )
    for trajectory in group.trajectories:
        assert trajectory.stop_reason is StopReason.WON, trajectory.stop_reason
        assert [t.status for t in trajectory.turns] == [TurnStatus.EXECUTED, TurnStatus.WON]
        listed = "Available actions" in trajectory.turns[0].tool_message.content  # type: ignore[union-attr]
        assert listed is plain
