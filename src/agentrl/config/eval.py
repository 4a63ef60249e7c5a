"""`EvalConfig`: one evaluation (defaults: the published recipe's evaluation)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, field_validator, model_validator

from agentrl.config.common import CommonConfig, must_not_be
from agentrl.config.names import EvalPolicy, EvalSplit

__all__ = ["EvalConfig"]


class EvalConfig(CommonConfig):
    """Configuration of one evaluation (defaults: the published recipe's evaluation)."""

    output: Path = Field(description="eval JSONL file to write (episodes and summaries)")
    policy: EvalPolicy = Field(
        EvalPolicy.MODEL,
        description="who plays: the model or a baseline of the env: planner (alfworld), "
        "solver (pycode, search), nosearch (search); `agentrl envs` lists each env's",
    )
    model_path: str | None = Field(
        None, description="sampler checkpoint to evaluate (default: the base model)"
    )
    split: EvalSplit = Field(
        EvalSplit.ALL, description="games to evaluate: valid_seen, valid_unseen or all"
    )
    limit_per_split: int | None = Field(
        None, ge=1, description="evaluate at most this many games of each split"
    )
    games_per_batch: int = Field(16, ge=1, description="games evaluated concurrently")
    trajectories_per_game: int = Field(1, ge=1, description="trajectories sampled per game")
    temperature: float = Field(0.01, ge=0.0, description="sampling temperature")
    overwrite_output: bool = Field(
        False, description="replace an existing output file instead of refusing"
    )
    resume: bool = Field(
        False, description="finish an interrupted evaluation, skipping episodes already written"
    )
    retry_errors: bool = Field(
        False, description="with resume: play again the episodes that ended with an env_error"
    )

    @field_validator("output")
    @classmethod
    def _check_output(cls, value: Path) -> Path:
        if value.suffix != ".jsonl":
            raise ValueError(f"output must be a .jsonl file, got {str(value)!r}")
        must_not_be(value, "folder", "a .jsonl file")
        return value

    @model_validator(mode="after")
    def _check_modes(self) -> Self:
        if self.retry_errors and not self.resume:
            raise ValueError(
                "retry_errors replays the env_error episodes of an existing output; it needs "
                "resume (--resume --retry-errors)"
            )
        if self.overwrite_output and self.resume:
            raise ValueError(
                "overwrite_output and resume contradict each other: resume keeps the episodes "
                "already written, overwrite_output deletes them; pass only one"
            )
        if self.policy is not EvalPolicy.MODEL and self.model_path is not None:
            raise ValueError(
                f"model_path is set but policy is {self.policy.value!r}: the "
                f"{self.policy.value} baseline uses no model; drop model_path or use policy "
                "'model'"
            )
        return self
