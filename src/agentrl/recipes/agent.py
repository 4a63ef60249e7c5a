"""Train an agent written without agentrl: the gateway, its server, the agent player and the
`Trainer`, put together and taken apart in one place (`agentrl train --agent`, example 05).

    async with agent_trainer(agent, tasks, config=config, backend=backend,
                             tokenizer=tokenizer) as run:
        result = await run.trainer.run()
        print(run.gateway.stats)

The agent (`agentrl.gateway.AgentFn`) is called with an `AgentEndpoint` (a session's base URL,
api key and model name) and a task; K copies per task play against a gateway served on a free
loopback port, and the sessions become the update's trajectories. docs/gateway.md has the guide.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agentrl.backends.base import TrainingBackend
from agentrl.config import TrainConfig
from agentrl.core.types import TaskInfo
from agentrl.gateway import AgentFn, AgentPlayer, Gateway, GatewayServer
from agentrl.training.build import renderer_for_tools, rollout_config_for
from agentrl.training.trainer import Trainer

__all__ = ["AgentTraining", "agent_trainer"]


@dataclass(frozen=True)
class AgentTraining:
    """What `agent_trainer` serves while its block runs."""

    trainer: Trainer
    gateway: Gateway
    """The gateway the agents call (its `stats`: calls, errors by kind)."""
    base_url: str
    """The server's root URL (`{base_url}/s/{session}/v1` is a session's endpoint)."""


@asynccontextmanager
async def agent_trainer(
    agent: AgentFn,
    tasks: Sequence[TaskInfo],
    *,
    config: TrainConfig,
    backend: TrainingBackend,
    tokenizer: Any,
    timeout: float | None = None,
    progress: bool = True,
    announce: Callable[[str], None] | None = None,
) -> AsyncIterator[AgentTraining]:
    """A `Trainer` (with its gateway and URL) whose groups are K copies of `agent` per task of
    `tasks`, played against a gateway that renders with `tokenizer` as `config` says (chat
    template, dialect, thinking) and samples through `backend`'s sampler.

    `timeout` (default `config.agent_timeout`) cancels a hung agent: its branch ends as
    `env_error`. `announce` receives one line naming the gateway's URL once it serves. On exit
    the trainer is closed and the server stopped; `backend` stays open (its caller closes it)."""
    rollout = rollout_config_for(config, config.group_size, config.sampling_params())
    gateway = Gateway(
        lambda tools: renderer_for_tools(tokenizer, tools, config),
        config=rollout,
        model=config.base_model,
    )
    async with GatewayServer(gateway) as server:
        if announce is not None:
            announce(f"gateway: {server.base_url}/s/<session>/v1 (one session per episode)")
        player = AgentPlayer(
            agent,
            gateway=gateway,
            base_url=server.base_url,
            config=rollout,
            reward_fn=config.reward_fn(),
            timeout=config.agent_timeout if timeout is None else timeout,
        )
        trainer = Trainer(
            config=config,
            backend=backend,
            env_factory=None,  # no env: the agent plays the tasks
            tasks=list(tasks),
            renderer=renderer_for_tools(tokenizer, (), config),
            protocol=None,  # no protocol: the agent brings its own tools
            player=player,
            progress=progress,
        )
        try:
            yield AgentTraining(trainer, gateway, server.base_url)
        finally:
            await trainer.close()
