"""Synthetic trajectories and groups for unit tests of estimators and datums."""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentrl.core.types import (
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
