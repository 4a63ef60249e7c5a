"""A small function-tool env, its protocol, and an agent written with the plain `openai` client
that plays it through the gateway exactly as the rollout engine plays the env."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.chat import ChatRenderer
from agentrl.core.types import EnvStep, Message, TaskInfo, ToolCall
from agentrl.gateway import Gateway
from agentrl.rollout import RolloutConfig
from agentrl.tools import FunctionEnv, tool

MAX_STEPS = 10
TARGET = 6
TASK = TaskInfo(task_id="count-to-6", description="Add ones until the total reaches 6.")
CONFIG = RolloutConfig(
    group_size=1, max_env_steps=MAX_STEPS, max_trajectory_tokens=4_000, max_assistant_tokens=64
)


class Counter(FunctionEnv):
    """Add to a total; reaching `TARGET` wins."""

    def __init__(self, task: TaskInfo) -> None:
        self.total = 0

    def observation(self) -> str:
        return "The total is 0."

    @tool
    def add(self, amount: int) -> str:
        """Add to the total.

        Args:
            amount: How much to add.
        """
        self.total += amount
        self.done = self.won = self.total >= TARGET
        return f"total {self.total}"


PROTOCOL = Counter.protocol("You count. Call add until the total reaches the target.")


def first_messages() -> list[dict[str, Any]]:
    """The system and user messages the rollout engine starts the episode with, as dicts."""
    messages = PROTOCOL.initial_messages(
        TASK, EnvStep(observation=Counter(TASK).observation()), MAX_STEPS
    )
    return [{"role": m.role, "content": m.content} for m in messages]


def add_reply(renderer: ChatRenderer, amount: int = 1) -> str:
    """The text a model of the renderer's family writes to call add(amount)."""
    return renderer.dialect.write(ToolCall("add", {"amount": str(amount)}))


def gateway_for(tokenizer: Any, **kwargs: Any) -> Gateway:
    """A gateway rendering with `tokenizer` and the test budgets."""
    return Gateway.for_tokenizer(tokenizer, config=kwargs.pop("config", CONFIG), **kwargs)


def tools() -> list[dict[str, Any]]:
    """The tool schemas, as an agent would send them (plain JSON)."""
    return json.loads(json.dumps(list(PROTOCOL.tools)))


@dataclass
class Played:
    """What the openai-client agent saw."""

    total: int
    calls: int
    messages: list[dict[str, Any]]


def tool_result(total: int, step: int) -> str:
    """The tool message the protocol writes after a call (output, then the step counter)."""
    return f"total {total}\n[step {step} of {MAX_STEPS}]"


def play_sync(client: Any, drop_at: int | None = None, stream: bool = False) -> Played:
    """Play the Counter task with a sync `openai.OpenAI` client: call, run `add`, send the
    result back; `drop_at` removes the first tool result from the history at that call."""
    messages = first_messages()
    total = 0
    calls = 0
    for step in range(1, MAX_STEPS + 1):
        if drop_at is not None and step == drop_at:
            del messages[3]  # the first tool result (system, user, assistant, tool, ...)
        kwargs: dict[str, Any] = {"model": "agentrl", "messages": messages, "tools": tools()}
        if stream:
            message = _streamed(client.chat.completions.create(**kwargs, stream=True))
        else:
            message = (
                client.chat.completions.create(**kwargs)
                .choices[0]
                .message.model_dump(exclude_none=True)
            )
        calls += 1
        messages.append(message)
        tool_calls = message.get("tool_calls") or []
        if not tool_calls:
            break
        for call in tool_calls:
            total += json.loads(call["function"]["arguments"])["amount"]
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": tool_result(total, step)}
            )
        if total >= TARGET:
            break
    return Played(total, calls, messages)


def _streamed(chunks: Any) -> dict[str, Any]:
    """The assistant message a streamed answer adds up to."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(
                    call.index,
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] += call.id or ""
                entry["function"]["name"] += call.function.name or ""
                entry["function"]["arguments"] += call.function.arguments or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def trained_tokens_are_sampled(turns: Sequence[Any], full: Sequence[int]) -> bool:
    """Whether every turn's completion sits in `full` right after its prompt."""
    return all(
        tuple(full[len(t.prompt_tokens) : len(t.prompt_tokens) + len(t.completion_tokens)])
        == tuple(t.completion_tokens)
        for t in turns
    )


def message_texts(messages: Sequence[Message]) -> list[str]:
    """The contents of messages."""
    return [m.content for m in messages]


async def play_async(client: Any, messages: list[dict[str, Any]]) -> Played:
    """`play_sync` with an `openai.AsyncOpenAI` client, from the given first messages."""
    messages = list(messages)
    total = 0
    calls = 0
    for step in range(1, MAX_STEPS + 1):
        response = await client.chat.completions.create(
            model="agentrl", messages=messages, tools=tools()
        )
        message = response.choices[0].message.model_dump(exclude_none=True)
        calls += 1
        messages.append(message)
        for call in message.get("tool_calls") or []:
            total += json.loads(call["function"]["arguments"])["amount"]
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": tool_result(total, step)}
            )
        if not message.get("tool_calls") or total >= TARGET:
            break
    return Played(total, calls, messages)
