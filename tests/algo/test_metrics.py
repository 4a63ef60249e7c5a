"""Metrics: hand-computed examples on synthetic trajectories."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from agentrl.advantages import GroupMean, LeaveOneOut
from agentrl.metrics import (
    OVERALL,
    EpisodeStats,
    SplitSummary,
    UpdateMetrics,
    episode_stats,
    eval_summaries,
    update_metrics,
)
from agentrl.testing import synthetic_group, synthetic_trajectory
from agentrl.types import StopReason, TaskInfo, TokenCounts, Trajectory, TurnStatus

E, NA, IF = TurnStatus.EXECUTED, TurnStatus.NOT_ADMISSIBLE, TurnStatus.INVALID_FORMAT


def _with(
    t: Trajectory, task_type: str, split: str, total: int, completion: int, prefill: int
) -> Trajectory:
    return replace(
        t,
        task=TaskInfo(task_id=f"{split}/{task_type}/{t.branch}", task_type=task_type, split=split),
        tokens=TokenCounts(prompt=total - 3, completion=completion, prefill=prefill, total=total),
    )


@pytest.fixture
def three() -> list[Trajectory]:
    won = synthetic_trajectory(
        completion_lens=(2, 2, 2), statuses=(E, NA, E), won=True, reward=0.9, branch=0
    )
    cut = synthetic_trajectory(
        completion_lens=(2, 2),
        statuses=(IF, E),
        reward=-0.1,
        stop_reason=StopReason.MAX_STEPS,
        branch=1,
    )
    crashed = synthetic_trajectory(
        completion_lens=(2,), statuses=(E,), stop_reason=StopReason.SAMPLER_ERROR, branch=2
    )
    return [
        _with(won, "A", "valid_seen", 100, 10, 50),
        _with(cut, "B", "valid_unseen", 200, 20, 80),
        _with(crashed, "A", "valid_seen", 50, 5, 30),
    ]


def test_episode_stats_hand_computed(three: list[Trajectory]) -> None:
    s = episode_stats(three)
    assert (s.episodes, s.wins) == (3, 1)
    assert s.success_rate == pytest.approx(1 / 3)
    assert s.reward_mean == pytest.approx(0.8 / 3)
    assert s.reward_std == pytest.approx(math.sqrt(0.60666666 / 3), rel=1e-6)
    # env steps: 3 + 1 (the invalid-format turn never reached the env) + 1
    assert s.mean_env_steps == pytest.approx(5 / 3)
    assert s.mean_turns == pytest.approx(2.0)
    assert s.truncation_rate == pytest.approx(1 / 3)
    assert s.error_rate == pytest.approx(1 / 3)
    assert s.tool_format_rate == pytest.approx(5 / 6)
    assert s.admissible_action_rate == pytest.approx(4 / 5)
    assert s.mean_invalid_actions == pytest.approx(2 / 3)
    assert dict(s.stop_reasons) == {"max_steps": 1, "sampler_error": 1, "won": 1}
    assert s.tokens.mean_total == pytest.approx(350 / 3)
    assert s.tokens.max_total == 200
    assert s.tokens.mean_completion == pytest.approx(35 / 3)
    assert (s.tokens.sum_completion, s.tokens.sum_prefill) == (35, 160)


def test_empty_set_gives_zeros_not_nan() -> None:
    s = episode_stats([])
    assert s == EpisodeStats()
    assert all(not math.isnan(v) for v in s.as_flat().values())


def test_eval_summaries_split_and_task_breakdown(three: list[Trajectory]) -> None:
    summaries = eval_summaries(three)
    assert [s.split for s in summaries] == ["valid_seen", "valid_unseen", OVERALL]
    seen, unseen, overall = summaries
    assert seen.stats.episodes == 2
    assert seen.stats.success_rate == pytest.approx(0.5)
    assert seen.stats.tool_format_rate == pytest.approx(1.0)
    assert seen.stats.admissible_action_rate == pytest.approx(3 / 4)
    assert unseen.stats.tool_format_rate == pytest.approx(0.5)
    assert unseen.stats.truncation_rate == pytest.approx(1.0)
    assert overall.stats == episode_stats(three)
    assert list(overall.per_task_type) == ["A", "B"]
    assert overall.success_by_task_type() == pytest.approx({"A": 0.5, "B": 0.0})
    assert overall.per_task_type["A"].mean_invalid_actions == pytest.approx(0.5)
    assert list(unseen.per_task_type) == ["B"]


def test_summary_json_round_trip(three: list[Trajectory]) -> None:
    overall = eval_summaries(three)[-1]
    text = json.dumps(overall.to_json(), allow_nan=False)
    again = SplitSummary.from_json(json.loads(text))
    assert again == overall
    flat = overall.as_flat()
    assert flat["stats/success_rate"] == pytest.approx(1 / 3)
    assert flat["per_task_type/B/mean_invalid_actions"] == pytest.approx(1.0)
    assert flat["stats/stop_reasons/won"] == 1.0
    assert flat["stats/tokens/sum_prefill"] == 160.0
    assert "split" not in flat


def test_from_json_names_the_bad_field(three: list[Trajectory]) -> None:
    obj = eval_summaries(three)[-1].to_json()
    stats = obj["stats"]
    assert isinstance(stats, dict)
    stats["success_rate"] = "lots"
    with pytest.raises(ValidationError, match="success_rate"):
        SplitSummary.from_json(obj)


def test_update_metrics_with_advantages() -> None:
    groups = [
        synthetic_group([1.0, 0.0, 0.5], group_id="a"),
        synthetic_group([0.0, 0.0], group_id="b", seed=1),
    ]
    advantages = LeaveOneOut().estimate(groups)
    m = update_metrics(
        3,
        groups,
        advantages,
        loss=0.25,
        trained_tokens=12,
        backend={"grad_norm": 0.5},
        timings={"rollout": 1.5},
    )
    assert (m.update, m.groups, m.degenerate_groups) == (3, 2, 1)
    # LOO gives the 0.5 trajectory advantage 0: only two trajectories carry signal
    assert (m.trained_trajectories, m.skipped_trajectories) == (2, 3)
    assert m.stats.episodes == 5
    assert m.stats.success_rate == pytest.approx(2 / 5)
    assert dict(m.success_by_task_type) == {"unknown": pytest.approx(2 / 5)}
    flat = m.as_flat()
    assert flat["loss"] == 0.25
    assert flat["backend/grad_norm"] == 0.5
    assert flat["timings/rollout"] == 1.5
    assert UpdateMetrics.from_json(json.loads(json.dumps(m.to_json()))) == m


def test_update_metrics_without_advantages_counts_usable_trajectories() -> None:
    groups = [
        synthetic_group([1.0, 0.0, 0.5], group_id="a"),
        synthetic_group([0.0, 0.0], group_id="b", seed=1),
    ]
    m = update_metrics(1, groups)
    assert (m.degenerate_groups, m.trained_trajectories, m.skipped_trajectories) == (1, 3, 2)
    assert m.loss is None
    assert update_metrics(1, groups, GroupMean().estimate(groups)).trained_trajectories == 2


def test_update_metrics_rejects_misaligned_advantages() -> None:
    groups = [synthetic_group([1.0, 0.0])]
    advantages = GroupMean().estimate([*groups, *groups])
    with pytest.raises(ValueError, match="2 groups but 1"):
        update_metrics(1, groups, advantages)


def test_metrics_config_and_reporting_stay_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentrl.metrics, agentrl.config, agentrl.registry, agentrl.reporting\n"
        "heavy = [m for m in ('torch', 'transformers', 'textworld', 'alfworld', 'pytrio', "
        "'swanlab', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
