"""Shared fixtures for backend tests: trajectories and datums built by agentrl.datums."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from agentrl.datums import Datum, trajectory_to_datum
from agentrl.types import (
    ParsedAction,
    StopReason,
    TaskInfo,
    Trajectory,
    Turn,
    TurnStatus,
)

DatumFactory = Callable[..., Datum]


def make_trajectory(
    rng: np.random.Generator, vocab: int, turns: int = 2, prompt_len: int = 12, gen_len: int = 6
) -> Trajectory:
    """A trajectory whose every prompt extends the previous prompt + completion."""
    prompt = tuple(int(t) for t in rng.integers(0, vocab, prompt_len))
    records = []
    for index in range(turns):
        completion = tuple(int(t) for t in rng.integers(0, vocab, gen_len))
        logprobs = tuple(float(x) for x in -rng.uniform(0.1, 3.0, gen_len))
        records.append(
            Turn(
                prompt_tokens=prompt,
                completion_tokens=completion,
                logprobs=logprobs,
                assistant_text="",
                parsed=ParsedAction(action="look"),
                status=TurnStatus.EXECUTED,
                env_step=None,
            )
        )
        tool = tuple(int(t) for t in rng.integers(0, vocab, 4 + index))
        prompt = prompt + completion + tool
    return Trajectory(
        turns=tuple(records),
        stop_reason=StopReason.ENV_DONE,
        won=False,
        group_id="g",
        task=TaskInfo(task_id="t"),
    )


@pytest.fixture
def datum_factory() -> DatumFactory:
    """Build datums from synthetic trajectories: factory(seed, vocab, advantage=..., turns=...)."""

    def build(
        seed: int = 0, vocab: int = 1000, advantage: float = 0.5, turns: int = 2, **kw: int
    ) -> Datum:
        rng = np.random.default_rng(seed)
        trajectory = make_trajectory(rng, vocab, turns=turns, **kw)
        return trajectory_to_datum(trajectory, [advantage] * turns)

    return build
