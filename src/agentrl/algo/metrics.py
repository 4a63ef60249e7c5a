"""Training and evaluation metrics computed from trajectories (pure: stdlib, numpy, pydantic).

Definitions (pooled over every trajectory given, so long episodes weigh more in turn-level
rates, as in the published recipe's summaries):

- `success_rate`: won episodes / episodes.
- `reward_mean`, `reward_std`: of the trajectory rewards (population std).
- `mean_env_steps`: turns whose action reached the environment (admissible or not).
- `truncation_rate`: episodes cut by a budget (max env steps, token budget, assistant
  token limit) / episodes. `error_rate`: episodes ended by a sampler or env failure.
- `tool_format_rate`: assistant turns whose tool call parsed / assistant turns.
- `admissible_action_rate`: parsed actions the environment could execute / parsed actions.
- `mean_invalid_actions`: invalid turns (bad format or not admissible) per episode.

A rate whose denominator is empty is 0.0 (never NaN, so records stay valid JSON).
Records are frozen dataclasses; `to_json()` gives the nested JSON form written to JSONL files,
`as_flat()` a flat `{"a/b": number}` map for metric sinks, and `from_json()` reads them back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Self

import numpy as np
from pydantic import TypeAdapter

from agentrl.algo.advantages import DEGENERATE_TOLERANCE, Advantages
from agentrl.algo.mismatch import LogprobMismatch
from agentrl.core.types import JsonObject, JsonValue, Trajectory, TrajectoryGroup

__all__ = [
    "OVERALL",
    "EpisodeStats",
    "SplitSummary",
    "TokenStats",
    "UpdateMetrics",
    "by_task_type",
    "episode_stats",
    "eval_summaries",
    "split_summary",
    "to_json_value",
    "update_metrics",
]

OVERALL = "overall"
"""The split name of the summary over every evaluated game."""

_SPLIT_ORDER = ("train", "valid_seen", "valid_unseen")


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / denominator if denominator else 0.0


def to_json_value(value: object) -> JsonValue:
    """A dataclass record (or mapping, tuple, enum, number) as a JSON-compatible value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_json_value(v) for v in value]
    if isinstance(value, Enum):
        return to_json_value(value.value)
    if isinstance(value, np.generic):
        return to_json_value(value.item())
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _flatten(value: JsonValue, prefix: str, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}/{key}" if prefix else key, out)
    elif isinstance(value, int | float):  # bool is an int
        out[prefix] = float(value)


class _Record:
    """JSON helpers shared by the metric records."""

    def to_json(self) -> JsonObject:
        """The record as a nested JSON object."""
        value = to_json_value(self)
        assert isinstance(value, dict)
        return value

    def as_flat(self, prefix: str = "") -> dict[str, float]:
        """Every numeric field as `{"a/b/c": value}` (strings are left out)."""
        out: dict[str, float] = {}
        _flatten(self.to_json(), prefix, out)
        return out

    @classmethod
    def from_json(cls, obj: object) -> Self:
        """Read a record written by `to_json()`; raises pydantic.ValidationError if malformed."""
        return TypeAdapter(cls).validate_python(obj)


@dataclass(frozen=True)
class TokenStats(_Record):
    """Token accounting over a set of trajectories."""

    mean_total: float = 0.0
    """Mean length of the full token sequence."""
    max_total: int = 0
    """Longest full token sequence."""
    mean_completion: float = 0.0
    """Mean sampled tokens per trajectory."""
    sum_completion: int = 0
    """Sampled tokens over all trajectories."""
    sum_prefill: int = 0
    """Tokens the sampler prefilled over all trajectories."""


@dataclass(frozen=True)
class EpisodeStats(_Record):
    """Aggregate statistics of a set of trajectories (see the module docstring)."""

    episodes: int = 0
    wins: int = 0
    success_rate: float = 0.0
    reward_mean: float = 0.0
    reward_std: float = 0.0
    mean_env_steps: float = 0.0
    mean_turns: float = 0.0
    truncation_rate: float = 0.0
    error_rate: float = 0.0
    errors: int = 0
    """Episodes ended by a sampler or env failure (`env_error`, `sampler_error`)."""
    reward_errors: int = 0
    """Episodes whose reward could not be computed (`reward_error`: a judge failed); their
    rewards are left out of `reward_mean` / `reward_std`."""
    tool_format_rate: float = 0.0
    admissible_action_rate: float = 0.0
    mean_invalid_actions: float = 0.0
    stop_reasons: Mapping[str, int] = field(default_factory=dict)
    """Episodes per stop reason (only reasons that occurred)."""
    tokens: TokenStats = field(default_factory=TokenStats)


def episode_stats(trajectories: Iterable[Trajectory]) -> EpisodeStats:
    """Aggregate statistics of `trajectories`."""
    items = list(trajectories)
    n = len(items)
    if n == 0:
        return EpisodeStats()
    scored = [t.reward for t in items if t.reward_error is None]
    rewards = np.array(scored or [0.0], dtype=np.float64)
    turns = [turn for t in items for turn in t.turns if not turn.summary]  # actions only
    parsed = [turn for turn in turns if turn.parsed.ok]
    admissible = sum(1 for turn in parsed if not turn.status.is_invalid)
    reasons: dict[str, int] = {}
    for t in items:
        reasons[t.stop_reason.value] = reasons.get(t.stop_reason.value, 0) + 1
    totals = [t.tokens.total for t in items]
    completions = [t.tokens.completion for t in items]
    return EpisodeStats(
        episodes=n,
        wins=sum(1 for t in items if t.won),
        success_rate=_ratio(sum(1 for t in items if t.won), n),
        reward_mean=float(rewards.mean()),
        reward_std=float(rewards.std()),
        mean_env_steps=_ratio(sum(t.env_steps for t in items), n),
        mean_turns=_ratio(len(turns), n),
        truncation_rate=_ratio(sum(1 for t in items if t.truncated), n),
        error_rate=_ratio(sum(1 for t in items if t.stop_reason.is_error), n),
        errors=sum(1 for t in items if t.stop_reason.is_error),
        reward_errors=sum(1 for t in items if t.reward_error is not None),
        tool_format_rate=_ratio(len(parsed), len(turns)),
        admissible_action_rate=_ratio(admissible, len(parsed)),
        mean_invalid_actions=_ratio(sum(t.invalid_actions for t in items), n),
        stop_reasons=dict(sorted(reasons.items())),
        tokens=TokenStats(
            mean_total=_ratio(sum(totals), n),
            max_total=max(totals),
            mean_completion=_ratio(sum(completions), n),
            sum_completion=sum(completions),
            sum_prefill=sum(t.tokens.prefill for t in items),
        ),
    )


def by_task_type(trajectories: Iterable[Trajectory]) -> dict[str, EpisodeStats]:
    """Statistics per task type, sorted by task type name."""
    buckets: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        buckets.setdefault(t.task.task_type, []).append(t)
    return {name: episode_stats(buckets[name]) for name in sorted(buckets)}


@dataclass(frozen=True)
class SplitSummary(_Record):
    """Evaluation summary of one split (or `overall`), with a breakdown per task type."""

    split: str
    stats: EpisodeStats
    per_task_type: Mapping[str, EpisodeStats] = field(default_factory=dict)

    def success_by_task_type(self) -> dict[str, float]:
        """Success rate of each task type."""
        return {name: s.success_rate for name, s in self.per_task_type.items()}


def split_summary(trajectories: Iterable[Trajectory], split: str) -> SplitSummary:
    """Summary of `trajectories` under the name `split`."""
    items = list(trajectories)
    return SplitSummary(split=split, stats=episode_stats(items), per_task_type=by_task_type(items))


def eval_summaries(trajectories: Iterable[Trajectory]) -> tuple[SplitSummary, ...]:
    """One summary per split present (by `task.split`), then the `overall` summary."""
    items = list(trajectories)
    splits: dict[str, list[Trajectory]] = {}
    for t in items:
        splits.setdefault(t.task.split, []).append(t)

    def order(name: str) -> tuple[int, str]:
        return (_SPLIT_ORDER.index(name) if name in _SPLIT_ORDER else len(_SPLIT_ORDER), name)

    per_split = tuple(split_summary(splits[name], name) for name in sorted(splits, key=order))
    return (*per_split, split_summary(items, OVERALL))


@dataclass(frozen=True)
class UpdateMetrics(_Record):
    """What one training update reports."""

    update: int
    """Update counter (1-based)."""
    stats: EpisodeStats
    """Rollout statistics of the update's trajectories."""
    success_by_task_type: Mapping[str, float]
    groups: int
    degenerate_groups: int
    """Groups whose advantages are all zero (no learning signal)."""
    trained_trajectories: int
    """Trajectories with a non-zero advantage, sent to the backend."""
    skipped_trajectories: int
    """Trajectories skipped because every advantage was zero."""
    loss: float | None = None
    trained_tokens: int = 0
    """Assistant tokens in the forward/backward batch."""
    sampler_kl: float | None = None
    """Estimated KL(sampler || trainer) per assistant token of the batch (~0 when the trainer
    recomputes the sampler's logprobs; see `agentrl.algo.mismatch`)."""
    logprob_diff_max: float | None = None
    """Largest |trainer - sampler| logprob over the batch's assistant tokens."""
    backend: Mapping[str, float] = field(default_factory=dict)
    """Scalars reported by forward_backward and optim_step (e.g. grad norm)."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds spent per phase (e.g. rollout, forward_backward, optim_step, save)."""
    sampling: Mapping[str, float] = field(default_factory=dict)
    """How the groups were obtained: staleness and stale groups (off-policy), replaced
    degenerate groups (dynamic sampling), group wall times (stragglers); see
    agentrl.training.pipeline."""


def _degenerate(group: TrajectoryGroup) -> bool:
    rewards = [t.reward for t in group.trajectories if t.usable]
    return not rewards or max(rewards) - min(rewards) <= DEGENERATE_TOLERANCE


def update_metrics(
    update: int,
    groups: Sequence[TrajectoryGroup],
    advantages: Advantages | None = None,
    *,
    loss: float | None = None,
    trained_tokens: int = 0,
    backend: Mapping[str, float] | None = None,
    timings: Mapping[str, float] | None = None,
    mismatch: LogprobMismatch | None = None,
    sampling: Mapping[str, float] | None = None,
) -> UpdateMetrics:
    """Metrics of one update from its groups and (if computed) the estimator's advantages.

    Without `advantages`, a group is degenerate when its usable rewards are all equal and its
    trajectories count as skipped.
    """
    trajectories = [t for g in groups for t in g.trajectories]
    if advantages is not None:
        if len(advantages.groups) != len(groups):
            raise ValueError(
                f"advantages cover {len(advantages.groups)} groups but {len(groups)} were given"
            )
        degenerate = advantages.degenerate_groups
        trained = sum(
            1
            for g in advantages.groups
            for i in range(len(g.per_turn))
            if not g.is_zero(i) and g.per_turn[i]
        )
    else:
        flags = [_degenerate(g) for g in groups]
        degenerate = sum(flags)
        trained = sum(
            1
            for g, flag in zip(groups, flags, strict=True)
            if not flag
            for t in g.trajectories
            if t.usable
        )
    return UpdateMetrics(
        update=update,
        stats=episode_stats(trajectories),
        success_by_task_type={k: v.success_rate for k, v in by_task_type(trajectories).items()},
        groups=len(groups),
        degenerate_groups=degenerate,
        trained_trajectories=trained,
        skipped_trajectories=len(trajectories) - trained,
        loss=loss,
        trained_tokens=trained_tokens,
        sampler_kl=None if mismatch is None else mismatch.sampler_kl,
        logprob_diff_max=None if mismatch is None else mismatch.max_abs_diff,
        backend=dict(backend or {}),
        timings=dict(timings or {}),
        sampling=dict(sampling or {}),
    )
