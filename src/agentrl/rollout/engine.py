"""The rollout engine: K branches of one game, sampled concurrently, exact token prefixes.

`rollout_group` plays one game with K branches that share the first prompt: turn 1 is ONE
sampling request with `num_samples=K`; after that every live branch sends its own request,
branches concurrently (asyncio), each branch strictly in order. Every prompt is the previous
one extended by `ChatRenderer.extend`, so the tokens a trajectory trains on are the tokens it
sampled from. A branch ends when the environment reports a win or the end of the episode,
after `max_env_steps` steps (by default every assistant reply uses one, as in the published
recipe), or when the next prompt would reach the trajectory token budget (the prompt is never
sent). A reply cut at the per-turn assistant token limit is, by default, an invalid-format turn
and the episode goes on. Whether a turn is invalid never depends on whether it also ended the
episode. The full table of turn semantics is in docs/tools-and-rollout.md. A
sampler error is retried with exponential backoff, then recorded as `sampler_error` for that
branch; an environment failure is recorded as `env_error`. Neither fails the batch.

`rollout_batch` runs many games concurrently with a bound on the number of live groups.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from agentrl.algo.rewards import Reward, WinMinusInvalid, apply_reward
from agentrl.backends.base import Sampler
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory, PlacedEnvGroup
from agentrl.core.errors import describe_exception
from agentrl.core.progress import progress_bar
from agentrl.core.tokens import TokenBuffer
from agentrl.core.types import (
    Completion,
    EnvStep,
    StopReason,
    TaskInfo,
    TokenCounts,
    Trajectory,
    TrajectoryGroup,
)
from agentrl.rollout.config import RolloutConfig, SamplerFailure
from agentrl.rollout.turn import (
    FIRST_REQUEST,
    Branch,
    Stepper,
    TurnSetup,
    play_turn,
    sample,
    turn_params,
    vocab_size,
)
from agentrl.tools import ToolProtocol

__all__ = ["group_id_at", "rollout_batch", "rollout_group"]

log = logging.getLogger(__name__)


def group_id_at(position: int, task: TaskInfo) -> str:
    """The id of the group of `task` at `position` of a batch (`rollout_batch`); it keys the
    group's sampling seeds (`agentrl.rollout.turn.turn_params`)."""
    return f"{position}:{task.task_id}"


async def _run_branch(
    branch: Branch, first: Completion, first_max: int, setup: TurnSetup, stepper: Stepper
) -> None:
    """Play the branch's first completion, then sample and play turns until it stops."""
    config = setup.config
    completion, max_tokens = first, first_max
    while True:
        await play_turn(branch, completion, max_tokens, setup, stepper)
        if branch.stop is not None:
            return
        max_tokens = min(
            config.max_assistant_tokens, config.max_trajectory_tokens - len(branch.prompt)
        )
        params = turn_params(setup, max_tokens, branch.index, len(branch.turns))
        try:
            prompt = branch.prompt.prefix()
            (completion,) = await sample(
                setup.sampler, prompt, 1, params, config, vocab_size(setup.renderer)
            )
        except SamplerFailure as exc:
            branch.stop, branch.error = StopReason.SAMPLER_ERROR, str(exc)
            return


def _trajectory(
    branch: Branch, task: TaskInfo, group_id: str, placement: str | None = None
) -> Trajectory:
    assert branch.stop is not None
    last = branch.turns[-1] if branch.turns else None
    tokens = TokenCounts(
        prompt=len(last.prompt_tokens) if last else len(branch.prompt),
        completion=branch.completion_tokens,
        prefill=branch.prefill,
        total=len(last.prompt_tokens) + len(last.completion_tokens) if last else 0,
    )
    return Trajectory(
        turns=tuple(branch.turns),
        stop_reason=branch.stop,
        won=branch.stop is StopReason.WON,
        group_id=group_id,
        task=task,
        tokens=tokens,
        messages=tuple(branch.messages),
        branch=branch.index,
        error=branch.error,
        placement=placement,
    )


async def _scored(
    reward_fn: Reward, trajectories: Sequence[Trajectory], group_id: str
) -> tuple[Trajectory, ...]:
    """`trajectories` with their rewards; a reward function that raises marks each one with
    `reward_error` (never a reward of 0 that looks real)."""
    try:
        return await apply_reward(reward_fn, trajectories)
    except Exception as exc:
        log.warning("the reward of %s failed: %s: %s", group_id, type(exc).__name__, exc)
        error = f"the reward function failed: {type(exc).__name__}: {exc}"
        return tuple(replace(t, reward_error=error) for t in trajectories)


async def rollout_group(
    task: TaskInfo,
    *,
    env_factory: EnvGroupFactory,
    sampler: Sampler,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig | None = None,
    reward_fn: Reward | None = None,
    group_id: str | None = None,
) -> TrajectoryGroup:
    """Play `config.group_size` branches of `task`; errors are recorded, never raised."""
    config = config or RolloutConfig()
    reward_fn = reward_fn or WinMinusInvalid()
    group_id = task.task_id if group_id is None else group_id
    size = config.group_size
    setup = TurnSetup(sampler, renderer, protocol, config, group_id, task)
    env = env_factory(task, size)

    def placement() -> str | None:
        return env.placement if isinstance(env, PlacedEnvGroup) else None

    async def ended(reason: StopReason, error: str | None) -> TrajectoryGroup:
        branches = [
            Branch(i, TokenBuffer(), EnvStep(observation=""), [], stop=reason, error=error)
            for i in range(size)
        ]
        played = [_trajectory(b, task, group_id, placement()) for b in branches]
        trajectories = await _scored(reward_fn, played, group_id)
        return TrajectoryGroup(group_id=group_id, task=task, trajectories=trajectories)

    stepper: Stepper | None = None
    try:
        try:
            initial = await env.reset()
            if len(initial) != size or initial[0].error is not None:
                raise RuntimeError(initial[0].error if initial else "reset() returned no steps")
        except Exception as exc:
            return await ended(StopReason.ENV_ERROR, f"reset failed: {describe_exception(exc)}")
        messages = protocol.initial_messages(task, initial[0], config.max_env_steps)
        prompt = renderer.initial_prompt(messages, protocol.tools)
        room = config.max_trajectory_tokens - len(prompt)
        if room < 1:
            return await ended(StopReason.TOKEN_BUDGET, None)
        max_tokens = min(config.max_assistant_tokens, room)
        try:
            params = turn_params(setup, max_tokens, FIRST_REQUEST)
            firsts = await sample(sampler, prompt, size, params, config, vocab_size(renderer))
        except SamplerFailure as exc:
            return await ended(StopReason.SAMPLER_ERROR, str(exc))
        stepper = Stepper(env)
        branches = [Branch(i, TokenBuffer(prompt), initial[i], list(messages)) for i in range(size)]
        await asyncio.gather(
            *(
                _run_branch(b, c, max_tokens, setup, stepper)
                for b, c in zip(branches, firsts, strict=True)
            )
        )
    finally:
        if stepper is not None:
            await stepper.stop()
        try:
            await env.close()
        except Exception as exc:
            log.warning("closing the environment of %s failed: %s", group_id, exc)
    played = [_trajectory(b, task, group_id, placement()) for b in branches]
    trajectories = await _scored(reward_fn, played, group_id)
    return TrajectoryGroup(group_id=group_id, task=task, trajectories=trajectories)


async def rollout_batch(
    tasks: Sequence[TaskInfo],
    *,
    env_factory: EnvGroupFactory,
    sampler: Sampler,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig | None = None,
    reward_fn: Reward | None = None,
    max_concurrent_groups: int = 8,
    on_group: Callable[[TrajectoryGroup], Awaitable[None] | None] | None = None,
    progress: bool = False,
) -> list[TrajectoryGroup]:
    """Roll out every task (one group each), at most `max_concurrent_groups` at a time.

    Groups come back in task order; `on_group` is called as each one finishes (e.g. to append
    it to a JSONL file, so nothing is lost on a crash); `progress` shows a tqdm bar.
    """
    if max_concurrent_groups < 1:
        raise ValueError(f"max_concurrent_groups must be >= 1, got {max_concurrent_groups}")
    limit = asyncio.Semaphore(max_concurrent_groups)
    bar = None
    if progress:
        bar = progress_bar(total=len(tasks), desc="rollout", unit="game")

    async def one(index: int, task: TaskInfo) -> TrajectoryGroup:
        async with limit:
            group = await rollout_group(
                task,
                env_factory=env_factory,
                sampler=sampler,
                renderer=renderer,
                protocol=protocol,
                config=config,
                reward_fn=reward_fn,
                group_id=group_id_at(index, task),
            )
        if on_group is not None:
            maybe = on_group(group)
            if maybe is not None:
                await maybe
        if bar is not None:
            bar.update(1)
        return group

    try:
        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))
    finally:
        if bar is not None:
            bar.close()
