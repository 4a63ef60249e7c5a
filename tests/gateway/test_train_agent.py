"""An agent written with the OpenAI Agents SDK (no agentrl import in it) trains for one update
through the gateway: the real `Trainer`, the real tiny `LocalBackend` (torch forward/backward,
AdamW, a checkpoint), the SDK's own tool loop. Sampling is a prompt-seeded text policy (the
random tiny model never writes a call): the same trajectories whatever the order of arrival."""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.core.types import TaskInfo, ToolCall
from agentrl.gateway import AgentEndpoint, AgentResult
from agentrl.recipes.agent import agent_trainer
from agentrl.testing import KeyedPolicySampler
from tests.helpers.trainer_helpers import PolicyDrivenBackend, tiny_backend, toy_config

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

TASKS = [
    TaskInfo(task_id=f"reach-{n}", description=f"Use add to reach a total of exactly {n}.")
    for n in (3, 4)
]


def counting_policy(renderer: ChatRenderer) -> Any:
    """Replies drawn with the request's keyed generator: add(1..2) or a final text."""

    def reply(prompt: str, draw: random.Random) -> str:
        if "total " in prompt and draw.random() < 0.35:
            return "Done."
        return renderer.dialect.write(ToolCall("add", {"amount": str(draw.randint(1, 2))}))

    return reply


async def sdk_agent(endpoint: Any, task: Any) -> Any:
    """A counter agent written with the OpenAI Agents SDK, as a user would write it."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from agents.exceptions import MaxTurnsExceeded
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    total = 0

    @function_tool
    def add(amount: int) -> str:
        """Add to the running total.

        Args:
            amount: How much to add.
        """
        nonlocal total
        total += amount
        return f"total {total}"

    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    model = OpenAIChatCompletionsModel(model=endpoint.model, openai_client=client)
    agent = Agent(name="counter", instructions="Count with the add tool.", tools=[add], model=model)
    with contextlib.suppress(MaxTurnsExceeded):
        await Runner.run(agent, task.description, max_turns=5)
    target = int(task.task_id.split("-")[1])
    return (1.0 if total == target else -abs(total - target) / target, total == target)


async def _adapted(endpoint: AgentEndpoint, task: TaskInfo) -> AgentResult:
    reward, won = await sdk_agent(endpoint, task)
    return AgentResult(reward=reward, won=won)


async def test_an_agents_sdk_agent_trains_one_update(qwen_tokenizer: Any, tmp_path: Any) -> None:
    config = toy_config(
        tmp_path / "run", max_steps=1, games_per_batch=2, group_size=4, save_every=1, seed=3
    )
    renderer = ChatRenderer(qwen_tokenizer, ())
    inner = tiny_backend(config, qwen_tokenizer)
    backend = PolicyDrivenBackend(inner, qwen_tokenizer, 0)
    backend._sampler = KeyedPolicySampler(qwen_tokenizer, counting_policy(renderer))
    async with agent_trainer(
        _adapted, TASKS, config=config, backend=backend, tokenizer=qwen_tokenizer, timeout=120
    ) as run:
        result = await run.trainer.run()
    gateway = run.gateway
    (metrics,) = result.metrics
    assert metrics.stats.episodes == 8 and metrics.stats.errors == 0
    assert metrics.trained_trajectories > 0 and metrics.loss is not None
    assert metrics.trained_tokens > 0
    assert [c.name for c in result.checkpoints] == ["update-0001"]
    assert not gateway.sessions and not gateway.stats.errors
    records = [
        json.loads(line) for line in (config.run_dir / "rollouts.jsonl").read_text().splitlines()
    ]
    trajectories = [t for r in records for t in r.get("trajectories", [r])]
    assert len(trajectories) == 8
    assert max(len(t["turns"]) for t in trajectories) >= 2  # the SDK ran its tool loop
