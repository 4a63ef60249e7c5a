"""The evaluation JSONL layout: `run`, `episode` and `summary` records (see docs/evaluation.md).

An `episode` record embeds one trajectory record: the conversation as text, and per turn the
assistant text, parsed action or parse error, status and the environment's feedback, plus
termination reason, reward and token counts. Token ids are not stored (a trajectory's prompt
grows every turn). `trajectory_record` / `trajectory_from_record` are the only two functions
that know the trajectory record's shape; reading gives back a `Trajectory` with empty token
tuples, enough for every metric in `agentrl.metrics` and for the viewer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrl.metrics import OVERALL, SplitSummary, eval_summaries
from agentrl.reporting.jsonl import JsonlError, read_jsonl
from agentrl.types import (
    EnvStep,
    JsonObject,
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

__all__ = [
    "EpisodeEntry",
    "EvalFile",
    "episode_id",
    "episode_record",
    "read_eval_file",
    "run_record",
    "summaries_in_order",
    "summary_record",
    "trajectory_from_record",
    "trajectory_record",
]

RECORD_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _ToolCallRecord(_Model):
    name: str
    arguments: dict[str, str] = {}


class _MessageRecord(_Model):
    role: Role
    content: str
    tool_calls: list[_ToolCallRecord] = []
    name: str | None = None


class _TurnRecord(_Model):
    assistant_text: str
    action: str | None = None
    parse_error: ParseErrorKind | None = None
    parse_error_detail: str = ""
    status: TurnStatus
    observation: str | None = None
    """The environment's feedback; None when the state was not advanced."""
    score: float = 0.0
    done: bool = False
    won: bool = False
    admissible: bool = True
    env_error: str | None = None
    completion_tokens: int = 0
    state_key: str | None = None


class _TaskRecord(_Model):
    task_id: str
    task_type: str = "unknown"
    description: str = ""
    split: str = "train"
    path: str | None = None


class _TokenRecord(_Model):
    prompt: int = 0
    completion: int = 0
    prefill: int = 0
    total: int = 0


class _TrajectoryRecord(_Model):
    version: int = RECORD_VERSION
    group_id: str
    branch: int = 0
    task: _TaskRecord
    stop_reason: StopReason
    won: bool
    reward: float
    error: str | None = None
    invalid_actions: int = 0
    env_steps: int = 0
    tokens: _TokenRecord = _TokenRecord()
    messages: list[_MessageRecord] = []
    turns: list[_TurnRecord] = []


def _turn_record(turn: Turn) -> _TurnRecord:
    step = turn.env_step
    error = turn.parsed.error
    return _TurnRecord(
        assistant_text=turn.assistant_text,
        action=turn.parsed.action,
        parse_error=error.kind if error else None,
        parse_error_detail=error.detail if error else "",
        status=turn.status,
        observation=step.observation if step else None,
        score=step.score if step else 0.0,
        done=step.done if step else False,
        won=step.won if step else False,
        admissible=step.admissible if step else False,
        env_error=step.error if step else None,
        completion_tokens=len(turn.completion_tokens),
        state_key=turn.state_key,
    )


def trajectory_record(trajectory: Trajectory) -> JsonObject:
    """A trajectory as a JSON object (text, actions, feedback, statuses; no token ids)."""
    t = trajectory
    record = _TrajectoryRecord(
        group_id=t.group_id,
        branch=t.branch,
        task=_TaskRecord(**asdict(t.task)),
        stop_reason=t.stop_reason,
        won=t.won,
        reward=t.reward,
        error=t.error,
        invalid_actions=t.invalid_actions,
        env_steps=t.env_steps,
        tokens=_TokenRecord(**asdict(t.tokens)),
        messages=[
            _MessageRecord(
                role=m.role,
                content=m.content,
                tool_calls=[
                    _ToolCallRecord(name=c.name, arguments=dict(c.arguments)) for c in m.tool_calls
                ],
                name=m.name,
            )
            for m in t.messages
        ],
        turns=[_turn_record(turn) for turn in t.turns],
    )
    return record.model_dump(mode="json")


def _turn(record: _TurnRecord) -> Turn:
    if record.action is not None:
        parsed = ParsedAction(action=record.action)
    else:
        parsed = ParsedAction.failure(
            record.parse_error or ParseErrorKind.MALFORMED, record.parse_error_detail
        )
    step = (
        None
        if record.observation is None
        else EnvStep(
            observation=record.observation,
            score=record.score,
            done=record.done,
            won=record.won,
            admissible=record.admissible,
            error=record.env_error,
        )
    )
    return Turn(
        prompt_tokens=(),
        completion_tokens=(),
        logprobs=(),
        assistant_text=record.assistant_text,
        parsed=parsed,
        status=record.status,
        env_step=step,
        state_key=record.state_key,
    )


def trajectory_from_record(obj: object) -> Trajectory:
    """Read a trajectory record back (token tuples are empty; counts are kept)."""
    r = _TrajectoryRecord.model_validate(obj)
    return Trajectory(
        turns=tuple(_turn(turn) for turn in r.turns),
        stop_reason=r.stop_reason,
        won=r.won,
        group_id=r.group_id,
        task=TaskInfo(**r.task.model_dump()),
        reward=r.reward,
        tokens=TokenCounts(**r.tokens.model_dump()),
        messages=tuple(
            Message(
                role=m.role,
                content=m.content,
                tool_calls=tuple(
                    ToolCall(name=c.name, arguments=c.arguments) for c in m.tool_calls
                ),
                name=m.name,
            )
            for m in r.messages
        ),
        branch=r.branch,
        error=r.error,
    )


def episode_id(task: TaskInfo, sample: int = 0) -> str:
    """Stable identifier of one evaluated trajectory: `<split>/<task_id>#<sample>`."""
    return f"{task.split}/{task.task_id}#{sample}"


def run_record(label: str, config: JsonObject) -> JsonObject:
    """The first record of an eval file: what was evaluated and how."""
    return {"type": "run", "version": RECORD_VERSION, "label": label, "config": config}


def episode_record(trajectory: Trajectory, sample: int = 0) -> JsonObject:
    """One `type=episode` record."""
    task = trajectory.task
    return {
        "type": "episode",
        "episode_id": episode_id(task, sample),
        "split": task.split,
        "task_id": task.task_id,
        "task_type": task.task_type,
        "sample": sample,
        "won": trajectory.won,
        "reward": trajectory.reward,
        "trajectory": trajectory_record(trajectory),
    }


def summary_record(summary: SplitSummary, label: str) -> JsonObject:
    """One `type=summary` record (per split, and `overall`)."""
    return {"type": "summary", "label": label, **summary.to_json()}


@dataclass(frozen=True)
class EpisodeEntry:
    """One episode read from an eval file."""

    episode_id: str
    trajectory: Trajectory


@dataclass(frozen=True)
class EvalFile:
    """What an eval JSONL file holds."""

    path: Path
    label: str
    episodes: tuple[EpisodeEntry, ...]
    summaries: dict[str, SplitSummary] = field(default_factory=dict)
    """The last summary written per split (`overall` included); empty if none was written."""
    config: JsonObject = field(default_factory=dict)

    @property
    def finished_ids(self) -> frozenset[str]:
        """Episode ids already written (what `--resume` skips)."""
        return frozenset(e.episode_id for e in self.episodes)

    def effective_summaries(self) -> dict[str, SplitSummary]:
        """The written summaries, or ones computed from the episodes if none were written."""
        if self.summaries:
            return self.summaries
        return {s.split: s for s in eval_summaries(e.trajectory for e in self.episodes)}


def _fail(path: Path, index: int, what: str, exc: Exception) -> JsonlError:
    return JsonlError(f"{path}: record {index}: malformed {what} record: {exc}")


def read_eval_file(path: Path) -> EvalFile:
    """Read an eval JSONL file (an incomplete last line, left by a crash, is skipped)."""
    path = Path(path)
    label: str | None = None
    config: JsonObject = {}
    episodes: dict[str, EpisodeEntry] = {}
    summaries: dict[str, SplitSummary] = {}
    for index, record in enumerate(read_jsonl(path), start=1):
        kind = record.get("type")
        try:
            if kind == "run":
                label = str(record.get("label") or label or "")
                raw_config = record.get("config")
                config = raw_config if isinstance(raw_config, dict) else {}
            elif kind == "episode":
                eid = str(record["episode_id"])
                episodes[eid] = EpisodeEntry(eid, trajectory_from_record(record["trajectory"]))
            elif kind == "summary":
                body = {k: v for k, v in record.items() if k not in ("type", "label")}
                summary = SplitSummary.from_json(body)
                summaries[summary.split] = summary
                label = label or str(record.get("label") or "")
        except (KeyError, ValidationError) as exc:
            raise _fail(path, index, str(kind), exc) from exc
    return EvalFile(
        path=path,
        label=label or path.stem,
        episodes=tuple(episodes.values()),
        summaries=summaries,
        config=config,
    )


def summaries_in_order(summaries: Iterable[SplitSummary]) -> list[SplitSummary]:
    """Summaries with `overall` last."""
    items = list(summaries)
    return [s for s in items if s.split != OVERALL] + [s for s in items if s.split == OVERALL]
