"""Players: who plays a game through the rollout engine (one `TaskInfo` in, one
`TrajectoryGroup` out). `model_player` samples from a `Sampler`; `ReplySampler` is a `Sampler`
that replies with scripted texts turn by turn, so a scripted baseline (the ALFWorld planner,
the pycode solver) is recorded exactly like a model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from agentrl.algo.rewards import Reward
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import Completion, CompletionStop, TaskInfo, TrajectoryGroup
from agentrl.rollout.config import RolloutConfig
from agentrl.rollout.engine import rollout_group
from agentrl.rollout.turn import FIRST_REQUEST, request_seed
from agentrl.tools import ToolProtocol

__all__ = ["PlayFn", "ReplySampler", "keyed_rollout", "model_player"]

PlayFn = Callable[[TaskInfo], Awaitable[TrajectoryGroup]]
"""Plays one game and returns its trajectories (one per sample)."""


def model_player(
    *,
    env_factory: EnvGroupFactory,
    sampler: Sampler,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    rollout: RolloutConfig,
    reward_fn: Reward,
) -> PlayFn:
    """Games played by a model through the rollout engine."""

    async def play(task: TaskInfo) -> TrajectoryGroup:
        return await rollout_group(
            task,
            env_factory=env_factory,
            sampler=sampler,
            renderer=renderer,
            protocol=protocol,
            config=rollout,
            reward_fn=reward_fn,
        )

    return play


class ReplySampler:
    """Replies with the k-th scripted text at the k-th assistant turn of each branch of one
    group (`replies`; `fallback` once they run out).

    The turn is read from the request's keyed seed (`agentrl.rollout.turn.request_seed`:
    the group's first request, then `(branch, turn)`), never from the prompt, so a context
    window that cuts earlier turns out of the prompts (`RecentTurns`) changes nothing. The
    sampler serves the group `group_id` played under `rollout` (its base seed, group size and
    step limit), as `rollout_group(task, config=rollout)` plays it (`group_id`: the task's id
    there). A request whose seed is none of those is refused (ValueError)."""

    def __init__(
        self,
        renderer: ChatRenderer,
        replies: Sequence[str],
        fallback: str,
        *,
        rollout: RolloutConfig,
        group_id: str,
    ) -> None:
        seed = rollout.sampling.seed
        if seed is None:
            raise ValueError(
                "ReplySampler reads the turn from each request's keyed seed: give the rollout "
                "config a base seed (RolloutConfig(sampling=SamplingParams(seed=0)); "
                "keyed_rollout(config) sets one)"
            )
        self.renderer = renderer
        self.replies = list(replies)
        self.fallback = fallback
        self._turns = {request_seed(seed, group_id, FIRST_REQUEST): 0}
        # a branch plays at most one turn per step, and one more per reply that reached no
        # environment (counted steps only under `env_calls`): a generous bound on the turns
        horizon = 4 * rollout.max_env_steps + len(self.replies) + 1
        for branch in range(rollout.group_size):
            for turn in range(1, horizon + 1):
                self._turns[request_seed(seed, group_id, branch, turn)] = turn

    def _turn(self, params: SamplingParams) -> int:
        if params.seed is None or params.seed not in self._turns:
            raise ValueError(
                f"ReplySampler got a request keyed {params.seed}, which is no turn of the group "
                "it serves: play it through rollout_group(task, config=rollout) with the "
                "rollout config and group id the sampler was made with"
            )
        return self._turns[params.seed]

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` copies of the scripted reply of the request's turn (logprobs 0)."""
        turn = self._turn(params)
        text = self.replies[turn] if turn < len(self.replies) else self.fallback
        tokens = list(self.renderer.encode(text))
        stop = CompletionStop.STOP
        if params.stop_tokens:
            tokens.append(params.stop_tokens[0])
        if len(tokens) > params.max_tokens:
            tokens, stop = tokens[: params.max_tokens], CompletionStop.LENGTH
        completion = Completion(tuple(tokens), (0.0,) * len(tokens), stop)
        return [completion] * num_samples


def keyed_rollout(config: RolloutConfig, seed: int = 0) -> RolloutConfig:
    """`config`, with the base sampling seed `seed` when it has none: a scripted player's
    requests must be keyed (`ReplySampler`); its replies do not depend on the seed."""
    if config.sampling.seed is not None:
        return config
    return replace(config, sampling=replace(config.sampling, seed=seed))
