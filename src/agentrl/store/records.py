"""Trajectory records: one JSON object per trajectory, for evaluation JSONL and the viewer.

`TrajectoryRecord.from_trajectory(t)` keeps what a person (or a metrics script) needs: the
conversation as text, per turn the assistant text, parsed action or parse error, status,
environment feedback and token counts, and per trajectory the termination reason, reward
and token counts. Token ids are left out unless asked for (`include_tokens=True`). The schema
is documented in docs/records.md; `schema_version` changes when a field changes meaning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrl.core.types import (
    EnvStep,
    Message,
    ParsedAction,
    ParseErrorKind,
    Role,
    StopReason,
    TaskInfo,
    TokenCounts,
    ToolCall,
    Trajectory,
    Turn,
    TurnStatus,
)
from agentrl.store.jsonl import JsonlWriter, WriteMode

__all__ = [
    "SCHEMA_VERSION",
    "MessageRecord",
    "RecordFileError",
    "TokenRecord",
    "TrajectoryRecord",
    "TurnRecord",
    "append_records",
    "read_records",
]

SCHEMA_VERSION = 1

Scalar = str | int | float | bool


class RecordFileError(ValueError):
    """A records file has a line that is not a valid trajectory record."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MessageRecord(_Record):
    """One chat message as text."""

    role: Role
    content: str
    name: str | None = None


class TokenRecord(_Record):
    """Token counts of a trajectory (see `agentrl.core.types.TokenCounts`)."""

    prompt: int = Field(description="length of the last prompt sent")
    completion: int = Field(description="sampled tokens, all turns")
    prefill: int = Field(description="prompt tokens the sampler computed, all turns")
    total: int = Field(description="last prompt + last completion")


class CallRecord(_Record):
    """One tool call of a function-tool turn and its result."""

    name: str
    arguments: dict[str, str] = Field(description="each argument as the model wrote it")
    output: str | None = Field(
        default=None, description="the call's result; None when the environment did not run it"
    )


class TurnRecord(_Record):
    """One assistant turn."""

    index: int
    assistant_text: str
    action: str | None = Field(description="the parsed, normalised action; None if invalid")
    parse_error: ParseErrorKind | None = None
    parse_detail: str | None = None
    status: TurnStatus
    observation: str | None = Field(
        description="the environment's answer; None when the state was not advanced"
    )
    score: float | None = None
    ended: bool | None = Field(
        default=None,
        description="the environment ended the episode after this turn (None: older record, "
        "inferred from the status)",
    )
    tool_message: str | None = Field(
        description="the tool message sent after this turn; None on the last turn"
    )
    prompt_tokens: int
    completion_tokens: int
    state_key: str | None = None
    logprobs: list[float] | None = Field(
        default=None, description="sampler logprob per completion token (include_tokens only)"
    )
    calls: list[CallRecord] | None = Field(
        default=None, description="the turn's tool calls, in order (function-tool turns only)"
    )
    new_segment: bool = Field(
        default=False,
        description="the prompt was rendered afresh (a new training segment), not extended",
    )
    dropped_turns: int = Field(
        default=0, description="earlier turns this turn's prompt left out (a context policy)"
    )
    policy_version: int | None = Field(
        default=None,
        description="training updates completed when the weights that sampled this turn were "
        "current (None: not tracked)",
    )
    segment_reason: str | None = Field(
        default=None,
        description="why the prompt was rendered afresh, when the agent's own history decided "
        "it (the gateway)",
    )


class TrajectoryRecord(_Record):
    """One trajectory, JSON-serialisable (one line of a JSONL file)."""

    schema_version: int = SCHEMA_VERSION
    group_id: str
    branch: int
    task_id: str
    task_type: str
    split: str
    description: str
    game_path: str | None = None
    stop_reason: StopReason
    won: bool
    truncated: bool
    reward: float
    error: str | None = None
    reward_error: str | None = Field(
        default=None, description="why no reward could be computed (a judge failed)"
    )
    reward_detail: str | None = Field(
        default=None, description="what the reward function said (a judge's reply)"
    )
    env_steps: int
    invalid_actions: int
    format_errors: int = Field(description="turns whose tool call did not parse")
    not_admissible: int = Field(description="parsed actions the environment could not run")
    tokens: TokenRecord
    messages: list[MessageRecord]
    turns: list[TurnRecord]
    full_tokens: list[int] | None = Field(
        default=None, description="the trajectory's whole token sequence (include_tokens only)"
    )
    extra: dict[str, Scalar] = Field(
        default_factory=dict, description="caller-supplied facts (checkpoint, seed, ...)"
    )
    placement: str | None = Field(
        default=None,
        description="where the env group was played (node, host, pid) under the process and "
        "Ray executors; None: in the trainer's process",
    )

    @classmethod
    def from_trajectory(
        cls,
        trajectory: Trajectory,
        *,
        include_tokens: bool = False,
        extra: Mapping[str, Scalar] | None = None,
    ) -> TrajectoryRecord:
        """The record of `trajectory`; `include_tokens` adds token ids and logprobs."""
        turns = []
        for index, turn in enumerate(trajectory.turns):
            error = turn.parsed.error
            step = turn.env_step
            turns.append(
                TurnRecord(
                    index=index,
                    assistant_text=turn.assistant_text,
                    action=turn.parsed.action,
                    parse_error=error.kind if error else None,
                    parse_detail=error.detail if error else None,
                    status=turn.status,
                    observation=step.observation if step else None,
                    score=step.score if step else None,
                    ended=turn.ended,
                    tool_message=turn.tool_message.content if turn.tool_message else None,
                    prompt_tokens=len(turn.prompt_tokens),
                    completion_tokens=len(turn.completion_tokens),
                    state_key=turn.state_key,
                    logprobs=list(turn.logprobs) if include_tokens else None,
                    calls=_call_records(turn.parsed.calls, step),
                    new_segment=turn.new_segment,
                    dropped_turns=turn.dropped_turns,
                    policy_version=turn.policy_version,
                    segment_reason=turn.segment_reason,
                )
            )
        statuses = [t.status for t in trajectory.turns]
        task, tokens = trajectory.task, trajectory.tokens
        return cls(
            group_id=trajectory.group_id,
            branch=trajectory.branch,
            task_id=task.task_id,
            task_type=task.task_type,
            split=task.split,
            description=task.description,
            game_path=task.path,
            stop_reason=trajectory.stop_reason,
            won=trajectory.won,
            truncated=trajectory.truncated,
            reward=trajectory.reward,
            error=trajectory.error,
            reward_error=trajectory.reward_error,
            reward_detail=trajectory.reward_detail,
            env_steps=trajectory.env_steps,
            invalid_actions=trajectory.invalid_actions,
            format_errors=statuses.count(TurnStatus.INVALID_FORMAT),
            not_admissible=statuses.count(TurnStatus.NOT_ADMISSIBLE),
            tokens=TokenRecord(
                prompt=tokens.prompt,
                completion=tokens.completion,
                prefill=tokens.prefill,
                total=tokens.total,
            ),
            messages=[
                MessageRecord(role=m.role, content=m.content, name=m.name)
                for m in trajectory.messages
            ],
            turns=turns,
            full_tokens=list(trajectory.full_tokens) if include_tokens else None,
            extra=dict(extra or {}),
            placement=trajectory.placement,
        )

    def to_trajectory(self) -> Trajectory:
        """The `Trajectory` this record describes, without token ids (counts are kept).

        Enough for every metric in `agentrl.algo.metrics`: statuses, parsed actions or parse
        errors, environment feedback (done / won / admissible follow from the status), stop
        reason, reward and token counts. Token and logprob tuples are empty.
        """
        last = len(self.turns) - 1
        turns = tuple(
            _turn_from_record(t, self.error if i == last else None)
            for i, t in enumerate(self.turns)
        )
        return Trajectory(
            turns=turns,
            stop_reason=self.stop_reason,
            won=self.won,
            group_id=self.group_id,
            task=TaskInfo(
                task_id=self.task_id,
                task_type=self.task_type,
                description=self.description,
                split=self.split,
                path=self.game_path,
            ),
            reward=self.reward,
            tokens=TokenCounts(**self.tokens.model_dump()),
            messages=tuple(
                Message(role=m.role, content=m.content, name=m.name) for m in self.messages
            ),
            branch=self.branch,
            error=self.error,
            reward_error=self.reward_error,
            reward_detail=self.reward_detail,
            placement=self.placement,
        )

    def to_json(self) -> str:
        """One line of JSON."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, line: str) -> TrajectoryRecord:
        """Parse one JSON line (raises pydantic.ValidationError)."""
        return cls.model_validate_json(line)


def _call_records(calls: Iterable[ToolCall], step: EnvStep | None) -> list[CallRecord] | None:
    records = []
    outputs = step.outputs if step is not None else ()
    for index, call in enumerate(calls):
        output = outputs[index] if index < len(outputs) else None
        records.append(CallRecord(name=call.name, arguments=dict(call.arguments), output=output))
    return records or None


def _turn_from_record(record: TurnRecord, error: str | None) -> Turn:
    """One turn back from its record (`error`: the trajectory's, for its last turn)."""
    calls = tuple(ToolCall(c.name, dict(c.arguments)) for c in record.calls or ())
    if record.action is not None:
        parsed = ParsedAction(action=record.action, calls=calls)
    else:
        kind = record.parse_error or ParseErrorKind.MALFORMED
        parsed = ParsedAction.failure(kind, record.parse_detail or "")
    step = None
    if record.observation is not None:
        status = record.status
        step = EnvStep(
            observation=record.observation,
            score=record.score or 0.0,
            done=status in (TurnStatus.WON, TurnStatus.ENDED)
            if record.ended is None
            else record.ended,
            won=status is TurnStatus.WON,
            admissible=status is not TurnStatus.NOT_ADMISSIBLE,
            error=error,
            outputs=tuple(c.output or "" for c in record.calls or ()),
        )
    message = None
    if record.tool_message is not None:
        message = Message(role="tool", content=record.tool_message)
    return Turn(
        prompt_tokens=(),
        completion_tokens=(),
        logprobs=(),
        assistant_text=record.assistant_text,
        parsed=parsed,
        status=record.status,
        env_step=step,
        tool_message=message,
        state_key=record.state_key,
        new_segment=record.new_segment,
        dropped_turns=record.dropped_turns,
        policy_version=record.policy_version,
        segment_reason=record.segment_reason,
    )


def append_records(path: str | os.PathLike[str], records: Iterable[TrajectoryRecord]) -> int:
    """Append records to a JSONL file, flushed and synced (safe to resume); returns the count.

    Goes through `agentrl.store.jsonl.JsonlWriter`: a cut last line left by a crash is
    dropped first (with a warning), so the file always reads.
    """
    count = 0
    with JsonlWriter(Path(path), WriteMode.APPEND, fsync=False) as writer:
        for record in records:
            writer.write_line(record.to_json())
            count += 1
        writer.sync()
    return count


def read_records(path: str | os.PathLike[str]) -> Iterator[TrajectoryRecord]:
    """Read a JSONL file of records; a bad line raises RecordFileError naming file and line.

    A final line without a newline (a write cut by a crash) that does not parse is skipped.
    """
    source = Path(path)
    try:
        with source.open(encoding="utf-8") as handle:
            lines = handle.readlines()
    except UnicodeDecodeError as exc:
        raise RecordFileError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield TrajectoryRecord.from_json(line)
        except (ValidationError, json.JSONDecodeError) as exc:
            if number == len(lines) and not line.endswith("\n"):
                return
            raise RecordFileError(
                f"{source}:{number}: not a trajectory record (schema_version "
                f"{SCHEMA_VERSION}): {exc}"
            ) from exc
