"""Trajectory records: built from real toy rollouts, JSON round trip, JSONL files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.records import (
    SCHEMA_VERSION,
    RecordFileError,
    TrajectoryRecord,
    append_records,
    read_records,
)
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler
from agentrl.types import CutReply, ParseErrorKind, StopReason, TrajectoryGroup, TurnStatus

PROTOCOL = toy_tool_protocol()
WIN = ["go to shelf 1", "take key 1 from shelf 1", "go to bin 1", "move key 1 to bin 1"]


@pytest.fixture(scope="module")
def group(qwen_tokenizer: Any) -> TrajectoryGroup:
    call = PROTOCOL.call_text
    scripts = [
        ["hmm", call("fly"), *map(call, WIN)],
        [call(WIN[0]), "x" * 5000],
    ]
    rollout = rollout_group(
        toy_tasks(1)[0],
        env_factory=make_toy_group,
        sampler=ScriptedSampler(qwen_tokenizer, scripts),
        renderer=ChatRenderer(qwen_tokenizer, PROTOCOL.tools),
        protocol=PROTOCOL,
        config=RolloutConfig(group_size=2, max_assistant_tokens=64, cut_reply=CutReply.END),
    )
    return asyncio.run(rollout)


def test_record_fields(group: TrajectoryGroup) -> None:
    won, cut = group.trajectories
    record = TrajectoryRecord.from_trajectory(won, extra={"checkpoint": "u40", "seed": 42})
    assert record.schema_version == SCHEMA_VERSION
    assert (record.stop_reason, record.won, record.reward) == (StopReason.WON, True, won.reward)
    assert record.task_id == "toy-0" and record.task_type == "toy_carry"
    assert (record.invalid_actions, record.format_errors, record.not_admissible) == (2, 1, 1)
    assert record.env_steps == 5 and len(record.turns) == 6
    first, second = record.turns[:2]
    assert first.action is None and first.parse_error is ParseErrorKind.NO_CALL
    assert first.observation is None and first.status is TurnStatus.INVALID_FORMAT
    assert second.action == "fly" and second.status is TurnStatus.NOT_ADMISSIBLE
    assert second.observation == "Nothing happens."
    assert record.turns[-1].tool_message is None and record.turns[0].tool_message
    assert [m.role for m in record.messages][:3] == ["system", "user", "assistant"]
    assert record.messages[2].content == "hmm"
    assert record.tokens.total == len(won.full_tokens)
    assert record.full_tokens is None and record.turns[0].logprobs is None
    assert record.extra == {"checkpoint": "u40", "seed": 42}
    cut_record = TrajectoryRecord.from_trajectory(cut)
    assert cut_record.stop_reason is StopReason.ASSISTANT_TOKEN_LIMIT and cut_record.truncated
    assert cut_record.turns[-1].parse_error is ParseErrorKind.TRUNCATED


def test_json_round_trip(group: TrajectoryGroup) -> None:
    for trajectory in group.trajectories:
        for include_tokens in (False, True):
            record = TrajectoryRecord.from_trajectory(trajectory, include_tokens=include_tokens)
            line = record.to_json()
            assert "\n" not in line
            plain = json.loads(line)
            assert plain["stop_reason"] == trajectory.stop_reason.value
            assert TrajectoryRecord.from_json(line) == record


def test_tokens_locate_every_completion(group: TrajectoryGroup) -> None:
    trajectory = group.trajectories[0]
    record = TrajectoryRecord.from_json(
        TrajectoryRecord.from_trajectory(trajectory, include_tokens=True).to_json()
    )
    assert record.full_tokens is not None
    for turn, original in zip(record.turns, trajectory.turns, strict=True):
        start = turn.prompt_tokens
        span = record.full_tokens[start : start + turn.completion_tokens]
        assert tuple(span) == original.completion_tokens
        assert turn.logprobs == pytest.approx(list(original.logprobs))


def test_jsonl_files(group: TrajectoryGroup, tmp_path: Path) -> None:
    path = tmp_path / "eval" / "records.jsonl"
    records = [TrajectoryRecord.from_trajectory(t) for t in group.trajectories]
    assert append_records(path, records[:1]) == 1
    assert append_records(path, records[1:]) == 1
    assert list(read_records(path)) == records
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"schema_version": 1, "group_id": "cut by a cra')
    assert list(read_records(path)) == records  # a torn last line is skipped
    path.write_text(records[0].to_json() + "\n{}\n" + records[1].to_json() + "\n")
    with pytest.raises(RecordFileError, match=r"records\.jsonl:2"):
        list(read_records(path))


def test_to_trajectory_keeps_every_metric(group: TrajectoryGroup) -> None:
    from agentrl.metrics import episode_stats

    for trajectory in group.trajectories:
        line = TrajectoryRecord.from_trajectory(trajectory).to_json()
        back = TrajectoryRecord.from_json(line).to_trajectory()
        assert episode_stats([back]) == episode_stats([trajectory])
        assert [t.status for t in back.turns] == [t.status for t in trajectory.turns]
        assert [t.parsed.action for t in back.turns] == [t.parsed.action for t in trajectory.turns]
        assert (back.task, back.tokens, back.stop_reason) == (
            trajectory.task,
            trajectory.tokens,
            trajectory.stop_reason,
        )
        assert [m.content for m in back.messages] == [m.content for m in trajectory.messages]
        assert back.turns[0].prompt_tokens == ()
