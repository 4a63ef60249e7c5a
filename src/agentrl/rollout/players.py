"""Players: who plays a game through the rollout engine (one `TaskInfo` in, one
`TrajectoryGroup` out). `model_player` samples from a `Sampler`; `ReplySampler` is a `Sampler`
that replies with scripted texts turn by turn, so a scripted baseline (the ALFWorld planner,
the pycode solver) is recorded exactly like a model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from agentrl.algo.rewards import Reward
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import Completion, CompletionStop, TaskInfo, TrajectoryGroup
from agentrl.rollout.config import RolloutConfig
from agentrl.rollout.engine import rollout_group
from agentrl.tools import ToolProtocol

__all__ = ["PlayFn", "ReplySampler", "model_player"]

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
    """Replies with the k-th scripted text at the k-th assistant turn of a trajectory."""

    def __init__(self, renderer: ChatRenderer, replies: Sequence[str], fallback: str) -> None:
        self.renderer = renderer
        self.replies = list(replies)
        self.fallback = fallback
        self._ends: dict[tuple[int, ...], int] = {}

    def _turn(self, prompt: tuple[int, ...]) -> int:
        best, turn = -1, 0
        for end, index in self._ends.items():
            if len(end) > best and prompt[: len(end)] == end:
                best, turn = len(end), index
        return turn

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        prompt = tuple(prompt_tokens)
        turn = self._turn(prompt)
        text = self.replies[turn] if turn < len(self.replies) else self.fallback
        tokens = list(self.renderer.encode(text))
        stop = CompletionStop.STOP
        if params.stop_tokens:
            tokens.append(params.stop_tokens[0])
        if len(tokens) > params.max_tokens:
            tokens, stop = tokens[: params.max_tokens], CompletionStop.LENGTH
        completion = Completion(tuple(tokens), (0.0,) * len(tokens), stop)
        self._ends[prompt + completion.tokens] = turn + 1
        return [completion] * num_samples
