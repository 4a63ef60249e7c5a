"""Eval JSONL records: trajectory round trip, file reading, summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl.metrics import OVERALL, episode_stats, eval_summaries
from agentrl.records import TrajectoryRecord
from agentrl.reporting.jsonl import JsonlError
from agentrl.reporting.records import episode_id, episode_record, read_eval_file
from agentrl.types import StopReason, TurnStatus
from tests.helpers.reporting_helpers import make_trajectory, standard_set, write_eval_file


def test_episode_record_round_trip_keeps_what_metrics_need() -> None:
    t = make_trajectory(
        "g1",
        actions=("go to desk 1", None, "use desklamp 1", "examine desk 1"),
        statuses=(
            TurnStatus.EXECUTED,
            TurnStatus.INVALID_FORMAT,
            TurnStatus.NOT_ADMISSIBLE,
            TurnStatus.EXECUTED,
        ),
        stop_reason=StopReason.MAX_STEPS,
    )
    episode = episode_record(t)
    text = json.dumps(episode)
    assert 'full_tokens": null' in text  # token ids are not stored
    stored = json.loads(text)["trajectory"]
    assert stored == TrajectoryRecord.from_trajectory(t).model_dump(mode="json")
    back = TrajectoryRecord.model_validate(stored).to_trajectory()
    assert back.task == t.task
    assert [(m.role, m.content) for m in back.messages] == [(m.role, m.content) for m in t.messages]
    assert back.tokens == t.tokens
    assert (back.stop_reason, back.won, back.reward) == (t.stop_reason, t.won, t.reward)
    assert [turn.status for turn in back.turns] == [turn.status for turn in t.turns]
    assert [turn.parsed for turn in back.turns] == [turn.parsed for turn in t.turns]
    assert [turn.env_step for turn in back.turns] == [turn.env_step for turn in t.turns]
    assert back.invalid_actions == 2
    assert back.env_steps == 3
    assert episode_stats([back]) == episode_stats([t])
    turns = stored["turns"]
    assert turns[1]["parse_error"] == "no_call"
    assert turns[2]["status"] == "not_admissible"


def test_episode_ids_are_stable_and_unique() -> None:
    a = make_trajectory("x", split="valid_seen")
    b = make_trajectory("x", split="valid_unseen")
    assert episode_id(a.task) == "valid_seen/x#0"
    assert episode_id(a.task) != episode_id(b.task)
    assert episode_record(a, sample=2)["episode_id"] == "valid_seen/x#2"


def test_read_eval_file(tmp_path: Path) -> None:
    trajectories = standard_set([True, False, True, True, False, False])
    path = write_eval_file(tmp_path / "base.jsonl", "base", trajectories)
    data = read_eval_file(path)
    assert data.label == "base"
    assert data.config == {"split": "all"}
    assert len(data.episodes) == 6
    assert "valid_unseen/game4#0" in data.finished_ids
    assert list(data.summaries) == ["valid_seen", "valid_unseen", OVERALL]
    assert data.summaries[OVERALL].stats.success_rate == pytest.approx(0.5)
    assert data.summaries["valid_seen"].stats.success_rate == pytest.approx(2 / 3)
    # summaries recomputed from the stored episodes agree with the written ones
    recomputed = {s.split: s for s in eval_summaries(e.trajectory for e in data.episodes)}
    assert recomputed == data.summaries


def test_missing_summaries_are_computed_from_episodes(tmp_path: Path) -> None:
    trajectories = standard_set([True, False, False, False, False, False])
    path = write_eval_file(tmp_path / "half.jsonl", "half", trajectories, summaries=False)
    data = read_eval_file(path)
    assert data.summaries == {}
    effective = data.effective_summaries()
    assert effective[OVERALL].stats.success_rate == pytest.approx(1 / 6)


def test_interrupted_file_is_readable(tmp_path: Path) -> None:
    path = write_eval_file(tmp_path / "e.jsonl", "e", standard_set([True] * 6), summaries=False)
    with path.open("a") as handle:
        handle.write('{"type": "episode", "episode_id": "valid_unseen/ga')
    with pytest.warns(UserWarning, match="incomplete"):
        assert len(read_eval_file(path).episodes) == 6


def test_malformed_episode_names_the_record(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    record = episode_record(make_trajectory("g"))
    trajectory = record["trajectory"]
    assert isinstance(trajectory, dict)
    trajectory["stop_reason"] = "bored"
    path.write_text(json.dumps({"type": "run", "label": "x"}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(JsonlError, match=r"bad\.jsonl: record 2: malformed episode"):
        read_eval_file(path)
