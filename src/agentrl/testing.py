"""Checks that any implementation of agentrl's contracts must pass.

`check_env_group` drives a fresh `EnvGroup` through its contract: identical initial state
across branches, result shapes, `None` leaving a branch unchanged, finished branches staying
finished, and an idempotent `close()`. Use it in your own tests::

    report = asyncio.run(check_env_group(lambda: MyEnvGroup(task, 4)))
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrl.env import EnvGroup
from agentrl.types import (
    EnvStep,
    ParsedAction,
    ParseErrorKind,
    StopReason,
    TaskInfo,
    Trajectory,
    TrajectoryGroup,
    Turn,
    TurnStatus,
)

__all__ = [
    "EnvCheckError",
    "EnvCheckReport",
    "check_env_group",
    "synthetic_group",
    "synthetic_trajectory",
]


class EnvCheckError(AssertionError):
    """An EnvGroup broke its contract."""


@dataclass(frozen=True)
class EnvCheckReport:
    """What the checker exercised."""

    group_size: int
    steps_taken: int
    branches_finished: int
    invalid_actions_tried: int


def _visible(step: EnvStep) -> tuple[object, ...]:
    return (
        step.observation,
        step.score,
        step.done,
        step.won,
        step.admissible_actions,
        step.state_key,
        step.error,
    )


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise EnvCheckError(message)


def _check_shape(steps: Sequence[EnvStep], size: int, where: str) -> None:
    _expect(isinstance(steps, list), f"{where}: expected a list of EnvStep, got {type(steps)}")
    _expect(len(steps) == size, f"{where}: expected {size} steps, got {len(steps)}")
    for i, step in enumerate(steps):
        _expect(isinstance(step, EnvStep), f"{where}: item {i} is {type(step)}, not EnvStep")
        _expect(isinstance(step.observation, str), f"{where}: branch {i} observation not str")
        _expect(
            all(isinstance(a, str) for a in step.admissible_actions),
            f"{where}: branch {i} admissible_actions must be strings",
        )


async def check_env_group(
    make_group: Callable[[], EnvGroup],
    *,
    max_steps: int = 60,
    invalid_action: str = "dance with the ceiling 42",
    seed: int = 0,
) -> EnvCheckReport:
    """Run the EnvGroup contract checks on a group built by `make_group`; raise on a breach.

    Branch 0 plays random admissible actions until it finishes (or `max_steps`), the last
    branch is never given an action (it must stay at its initial state), and the middle
    branches alternate between admissible and invalid actions.
    """
    rng = random.Random(seed)
    group = make_group()
    try:
        size = group.size
        _expect(size >= 1, f"group size must be >= 1, got {size}")
        initial = await group.reset()
        _check_shape(initial, size, "reset()")
        first = _visible(initial[0])
        for i, step in enumerate(initial[1:], start=1):
            _expect(
                _visible(step) == first,
                f"reset(): branch {i} differs from branch 0 "
                f"({step.observation[:80]!r} vs {initial[0].observation[:80]!r})",
            )
        _expect(not initial[0].finished, "reset(): the initial step is already finished")
        _expect(bool(initial[0].admissible_actions), "reset(): no admissible actions")

        try:
            await group.step([None] * (size + 1))
        except ValueError:
            pass
        else:
            raise EnvCheckError("step() accepted a list of actions of the wrong length")

        current = list(initial)
        finished_once = [False] * size
        steps_taken = 0
        invalid_tried = 0
        for turn in range(max_steps):
            actions: list[str | None] = []
            for i, step in enumerate(current):
                if step.finished or (size > 1 and i == size - 1):
                    actions.append(None)
                elif i > 0 and turn % 2 == 1:
                    actions.append(invalid_action)
                    invalid_tried += 1
                else:
                    actions.append(rng.choice(step.admissible_actions))
            if all(a is None for a in actions):
                break
            new = await group.step(actions)
            steps_taken += 1
            _check_shape(new, size, f"step() #{turn}")
            for i, (before, after, action) in enumerate(zip(current, new, actions, strict=True)):
                if action is None:
                    _expect(
                        _visible(after) == _visible(before),
                        f"step() #{turn}: branch {i} got None but changed",
                    )
                if action == invalid_action and not before.finished:
                    _expect(
                        not after.admissible,
                        f"step() #{turn}: branch {i} reported invalid action {action!r} "
                        "as admissible",
                    )
                if before.finished:
                    _expect(after.finished, f"step() #{turn}: finished branch {i} came back")
                if after.finished:
                    finished_once[i] = True
                if after.won:
                    _expect(after.done, f"step() #{turn}: branch {i} won but is not done")
            current = new

        if size > 1:
            _expect(
                _visible(current[-1]) == _visible(initial[-1]),
                "the branch that never got an action is no longer at its initial state",
            )
        for i, step in enumerate(current):
            if finished_once[i]:
                _expect(step.finished, f"branch {i} finished once but is live again")
        done_branches = [i for i, step in enumerate(current) if step.finished]
        if done_branches:
            probe: list[str | None] = [None] * size
            probe[done_branches[0]] = "look"
            try:
                after_probe = await group.step(probe)
            except ValueError:
                pass
            else:
                _expect(
                    after_probe[done_branches[0]].finished,
                    f"an action sent to finished branch {done_branches[0]} revived it",
                )
    finally:
        await group.close()
    await group.close()
    return EnvCheckReport(
        group_size=size,
        steps_taken=steps_taken,
        branches_finished=sum(finished_once),
        invalid_actions_tried=invalid_tried,
    )


def synthetic_trajectory(
    *,
    prompt_len: int = 6,
    completion_lens: Sequence[int] = (3,),
    tool_lens: Sequence[int] | None = None,
    statuses: Sequence[TurnStatus] | None = None,
    won: bool = False,
    reward: float = 0.0,
    stop_reason: StopReason | None = None,
    group_id: str = "g0",
    branch: int = 0,
    seed: int = 0,
    state_keys: Sequence[str | None] | None = None,
) -> Trajectory:
    """A structurally valid trajectory with made-up tokens, for unit tests of estimators/datums.

    Prompt, tool and closing tokens are drawn from ids 1000-1999; completion tokens from
    100000-100999, so a test can tell them apart. Every turn's prompt is the previous prompt
    + completion + a tool delta of `tool_lens[i]` tokens (default 4), as the rollout builds it.
    """
    rng = random.Random(seed)
    n = len(completion_lens)
    tool_lens = list(tool_lens) if tool_lens is not None else [4] * max(n - 1, 0)
    if len(tool_lens) != max(n - 1, 0):
        raise ValueError(f"need {max(n - 1, 0)} tool_lens for {n} turns, got {len(tool_lens)}")
    statuses = list(statuses) if statuses is not None else [TurnStatus.EXECUTED] * n
    keys = list(state_keys) if state_keys is not None else [None] * n
    if len(statuses) != n or len(keys) != n:
        raise ValueError(f"statuses and state_keys need {n} entries each")
    if won and statuses:
        statuses[-1] = TurnStatus.WON
    prompt = tuple(rng.randrange(1000, 2000) for _ in range(prompt_len))
    turns: list[Turn] = []
    for i, length in enumerate(completion_lens):
        completion = tuple(rng.randrange(100_000, 101_000) for _ in range(length))
        logprobs = tuple(-rng.random() * 3 for _ in range(length))
        status = statuses[i]
        step = (
            None
            if status is TurnStatus.INVALID_FORMAT
            else EnvStep(
                observation=f"obs {i}",
                admissible=status is not TurnStatus.NOT_ADMISSIBLE,
                won=status is TurnStatus.WON,
                done=status in (TurnStatus.WON, TurnStatus.ENDED),
            )
        )
        parsed = (
            ParsedAction.failure(ParseErrorKind.NO_CALL, "synthetic")
            if status is TurnStatus.INVALID_FORMAT
            else ParsedAction(action=f"action {i}")
        )
        turns.append(
            Turn(
                prompt_tokens=prompt,
                completion_tokens=completion,
                logprobs=logprobs,
                assistant_text=f"turn {i}",
                parsed=parsed,
                status=status,
                env_step=step,
                state_key=keys[i],
            )
        )
        if i < n - 1:
            prompt = (
                prompt + completion + tuple(rng.randrange(1000, 2000) for _ in range(tool_lens[i]))
            )
    if stop_reason is None:
        stop_reason = StopReason.WON if won else StopReason.ENV_DONE
    return Trajectory(
        turns=tuple(turns),
        stop_reason=stop_reason,
        won=won,
        group_id=group_id,
        task=TaskInfo(task_id=group_id),
        reward=reward,
        branch=branch,
    )


def synthetic_group(
    rewards: Sequence[float], *, group_id: str = "g0", turns: int = 2, seed: int = 0
) -> TrajectoryGroup:
    """A group of synthetic trajectories with the given rewards (won when reward > 0)."""
    trajectories = tuple(
        synthetic_trajectory(
            completion_lens=(3,) * turns,
            reward=r,
            won=r > 0,
            group_id=group_id,
            branch=i,
            seed=seed * 1000 + i,
        )
        for i, r in enumerate(rewards)
    )
    return TrajectoryGroup(
        group_id=group_id, task=TaskInfo(task_id=group_id), trajectories=trajectories
    )
