"""Train an agent written without agentrl: `AgentPlayer` runs K copies of an async agent
function per task against the gateway and returns their trajectories as a group.

    async def agent(endpoint, task) -> float:
        client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key)
        ...  # the agent's own loop, tools and prompts
        return reward

The agent gets an `AgentEndpoint` (attributes only: the agent needs no agentrl import) and the
`TaskInfo`. What it returns decides the outcome: a number is the reward (won when > 0); a bool
says whether it won, and the reward function scores the trajectory (default: `1[won] - 0.1 x
invalid turns`); an `AgentResult` gives both; None is a loss scored by the reward function.
An agent that raises, or runs past `timeout` seconds (it is cancelled), ends as `env_error`:
left out of its group's statistics, never a reward of 0. An agent whose call hit the token
budget (the gateway's 413) ends as `token_budget` whatever it raises then.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TypeAlias

from agentrl.algo.rewards import Reward, WinMinusInvalid, apply_reward
from agentrl.backends.base import Sampler
from agentrl.config.loading import load_object
from agentrl.core.errors import describe_exception
from agentrl.core.types import TaskInfo, Trajectory, TrajectoryGroup
from agentrl.gateway.service import Gateway
from agentrl.rollout import RolloutConfig, group_id_at
from agentrl.rollout.config import labelled_config

__all__ = [
    "AgentEndpoint",
    "AgentFn",
    "AgentOutcome",
    "AgentPlayer",
    "AgentResult",
    "load_agent",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentEndpoint:
    """Where one episode's agent sends its chat-completion calls."""

    base_url: str
    """The OpenAI base URL of the episode's session (`http://127.0.0.1:PORT/s/{id}/v1`)."""
    api_key: str
    """The session id (the plain `/v1` routes also accept it as the API key)."""
    model: str = "agentrl"


@dataclass(frozen=True)
class AgentResult:
    """An agent's outcome: its reward (None: scored by the reward function) and whether it
    won."""

    reward: float | None = None
    won: bool = False


AgentOutcome: TypeAlias = "float | int | bool | AgentResult | None"
AgentFn: TypeAlias = Callable[[AgentEndpoint, TaskInfo], Awaitable[AgentOutcome]]
"""`async agent(endpoint, task) -> outcome` (see the module docstring)."""


def _outcome(value: object) -> AgentResult:
    if value is None:
        return AgentResult()
    if isinstance(value, AgentResult):
        return value
    if isinstance(value, bool):
        return AgentResult(won=value)
    if isinstance(value, int | float):
        return AgentResult(reward=float(value), won=value > 0)
    raise TypeError(
        f"the agent returned {type(value).__name__}; return a number (the reward), a bool "
        "(won), an AgentResult or None"
    )


class AgentPlayer:
    """Plays one group of a task with K concurrent copies of `agent` (a `GroupPlayer`: what
    the `Trainer` takes as `player`).

    `gateway` must be served at `base_url` (a `GatewayServer`); `config` gives the group size,
    the budgets and the base seed of each episode's session; `timeout` the seconds one agent
    may run (None: no limit).
    """

    def __init__(
        self,
        agent: AgentFn,
        *,
        gateway: Gateway,
        base_url: str,
        config: RolloutConfig,
        reward_fn: Reward | None = None,
        timeout: float | None = 600.0,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"AgentPlayer timeout must be > 0 seconds, got {timeout}")
        self.agent = agent
        self.gateway = gateway
        self.base_url = base_url.rstrip("/")
        self.config = config
        self.reward_fn = reward_fn or WinMinusInvalid()
        self.timeout = timeout

    async def __call__(
        self, task: TaskInfo, position: int, sampler: Sampler, label: str
    ) -> TrajectoryGroup:
        """The group of `task` at `position` of the rollout call `label`, scored."""
        group_id = group_id_at(position, task)
        config = labelled_config(self.config, label)
        episodes = [
            self._episode(task, sampler, config, f"{label}-{group_id}-{branch}", branch, group_id)
            for branch in range(config.group_size)
        ]
        played = await asyncio.gather(*episodes)
        scored = [await self._score(trajectory, result) for trajectory, result in played]
        return TrajectoryGroup(group_id=group_id, task=task, trajectories=tuple(scored))

    async def _episode(
        self,
        task: TaskInfo,
        sampler: Sampler,
        config: RolloutConfig,
        session_id: str,
        branch: int,
        group_id: str,
    ) -> tuple[Trajectory, AgentResult | None]:
        session_id = session_id.replace("/", "_").replace(":", "_")
        session = self.gateway.open_session(
            session_id, sampler=sampler, task=task, group_id=group_id, branch=branch, config=config
        )
        endpoint = AgentEndpoint(
            f"{self.base_url}/s/{session.session_id}/v1", session.session_id, self.gateway.model
        )
        error: str | None = None
        result: AgentResult | None = None
        try:
            value = await asyncio.wait_for(self.agent(endpoint, task), self.timeout)
            result = _outcome(value)
        except TimeoutError:
            error = f"the agent did not finish within {self.timeout} s (cancelled)"
        except Exception as exc:
            error = f"the agent failed: {describe_exception(exc)}"
        if error is not None and session.stop is not None:
            error = None  # the gateway ended the episode (token budget): not the agent's fault
        if error is not None:
            log.warning("episode %s: %s", session_id, error)
        won = result.won if result is not None else False
        trajectory = self.gateway.end_session(session.session_id, won=won, error=error)
        return trajectory, result

    async def _score(self, trajectory: Trajectory, result: AgentResult | None) -> Trajectory:
        if result is not None and result.reward is not None:
            return replace(trajectory, reward=result.reward)
        if trajectory.stop_reason.is_error:
            return trajectory
        (scored,) = await apply_reward(self.reward_fn, [trajectory])
        return scored


def load_agent(spec: str) -> AgentFn:
    """The agent function `--agent MODULE:FUNCTION` (or `PATH.py:FUNCTION`) names; it must be
    an async function `(endpoint, task)`."""
    agent = load_object(spec, "--agent")
    if not inspect.iscoroutinefunction(agent) and not inspect.iscoroutinefunction(
        getattr(agent, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):
        raise ValueError(
            f"--agent {spec}: want an async function (endpoint, task) -> reward, got "
            f"{type(agent).__name__}"
        )
    return agent  # type: ignore[return-value]
