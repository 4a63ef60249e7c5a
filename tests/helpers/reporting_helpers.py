"""Shared builders for reporting tests: realistic-looking evaluated trajectories and eval files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentrl.metrics import eval_summaries
from agentrl.reporting.jsonl import JsonlWriter
from agentrl.reporting.records import episode_record, run_record, summary_record
from agentrl.types import (
    EnvStep,
    Message,
    ParsedAction,
    ParseErrorKind,
    StopReason,
    TaskInfo,
    TokenCounts,
    ToolCall,
    Trajectory,
    Turn,
    TurnStatus,
)

TASK_TYPES = ("pick_and_place_simple", "pick_heat_then_place_in_recep", "look_at_obj_in_light")


def make_trajectory(
    task_id: str,
    *,
    split: str = "valid_seen",
    task_type: str = TASK_TYPES[0],
    actions: Sequence[str | None] = ("go to countertop 1", "take apple 1 from countertop 1"),
    statuses: Sequence[TurnStatus] | None = None,
    won: bool = False,
    stop_reason: StopReason | None = None,
    observation_prefix: str = "You arrive at",
) -> Trajectory:
    """A trajectory with text turns and messages; `None` actions are unparseable calls."""
    if statuses is None:
        statuses = [
            TurnStatus.INVALID_FORMAT if a is None else TurnStatus.EXECUTED for a in actions
        ]
        if won:
            statuses[-1] = TurnStatus.WON
    task = TaskInfo(
        task_id=task_id,
        task_type=task_type,
        description=f"put a clean {task_id} in the fridge",
        split=split,
        path=f"{split}/{task_id}/game.tw-pddl",
    )
    messages = [
        Message("system", "You are a household agent."),
        Message("user", f"Your task is to: {task.description}"),
    ]
    turns: list[Turn] = []
    for i, (action, status) in enumerate(zip(actions, statuses, strict=True)):
        text = f"<tool_call>{action}</tool_call>" if action is not None else "I am done."
        parsed = (
            ParsedAction(action=action)
            if action is not None
            else ParsedAction.failure(ParseErrorKind.NO_CALL, "no <tool_call> found")
        )
        step = (
            None
            if action is None
            else EnvStep(
                observation=f"{observation_prefix} step {i}: {action}.",
                admissible=status is not TurnStatus.NOT_ADMISSIBLE,
                won=status is TurnStatus.WON,
                done=status in (TurnStatus.WON, TurnStatus.ENDED),
                score=1.0 if status is TurnStatus.WON else 0.0,
            )
        )
        turns.append(
            Turn(
                prompt_tokens=tuple(range(10 + 5 * i)),
                completion_tokens=(7, 8, 9),
                logprobs=(-0.1, -0.2, -0.3),
                assistant_text=text,
                parsed=parsed,
                status=status,
                env_step=step,
            )
        )
        calls = (ToolCall("alfworld_step", {"action": action}),) if action else ()
        messages.append(Message("assistant", text, tool_calls=calls))
        feedback = step.observation if step else "invalid tool-call format"
        messages.append(Message("tool", f"[{status.value}] {feedback}", name="alfworld_step"))
    invalid = sum(1 for s in statuses if s.is_invalid)
    return Trajectory(
        turns=tuple(turns),
        stop_reason=stop_reason or (StopReason.WON if won else StopReason.ENV_DONE),
        won=won,
        group_id=task_id,
        task=task,
        reward=(1.0 if won else 0.0) - 0.1 * invalid,
        tokens=TokenCounts(prompt=100, completion=3 * len(actions), prefill=120, total=103),
        messages=tuple(messages),
    )


def write_eval_file(
    path: Path, label: str, trajectories: Sequence[Trajectory], *, summaries: bool = True
) -> Path:
    """An eval JSONL file in the documented layout."""
    with JsonlWriter(path) as writer:
        writer.write(run_record(label, {"split": "all"}))
        for t in trajectories:
            writer.write(episode_record(t))
        if summaries:
            for summary in eval_summaries(trajectories):
                writer.write(summary_record(summary, label))
    return path


def standard_set(wins: Sequence[bool]) -> list[Trajectory]:
    """Six games (3 valid_seen, 3 valid_unseen, one per task type each), won as given."""
    out: list[Trajectory] = []
    for i, won in enumerate(wins):
        split = "valid_seen" if i < 3 else "valid_unseen"
        out.append(
            make_trajectory(
                f"game{i}",
                split=split,
                task_type=TASK_TYPES[i % 3],
                won=won,
                actions=("go to countertop 1", None, f"open fridge {i}"),
            )
        )
    return out
