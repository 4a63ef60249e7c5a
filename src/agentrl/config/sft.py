"""`SftOptions`: what supervised fine-tuning adds to a training run's model and backend fields.

`agentrl sft` takes the model, backend, optimizer, seed and run-folder flags of `TrainConfig`
(`SFT_TRAIN_FIELDS`) and these (`--data`, `--epochs`, ...). RL-only knobs (games, groups,
losses, estimators) do not apply and are not offered.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SFT_TRAIN_FIELDS", "SftOptions"]

SFT_TRAIN_FIELDS = (
    "preset",
    "base_model",
    "backend",
    "tokenizer_path",
    "chat_template",
    "enable_thinking",
    "tool_dialect",
    "allow_history_rewrite",
    "device",
    "lora_rank",
    "beta1",
    "beta2",
    "adam_eps",
    "weight_decay",
    "grad_clip_norm",
    "seed",
    "run_dir",
    "resume",
    "resume_fallback",
    "save_every",
    "max_trajectory_tokens",
    "max_in_flight",
    "mask_mode",
)
"""The `TrainConfig` fields `agentrl sft` offers as flags (`--max-trajectory-tokens` is the
most tokens one conversation segment may have; `--save-every` counts steps)."""


class SftOptions(BaseModel):
    """Supervised fine-tuning on conversations (OpenAI messages, one per JSONL line)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    data: Path = Field(
        description='JSONL of conversations, one {"messages": [...], "tools": [...]} per line '
        "(OpenAI chat format, tool calls included)"
    )
    eval_data: Path | None = Field(
        None, description="JSONL of held-out conversations (default: --eval-fraction of --data)"
    )
    eval_fraction: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="share of --data held out for the eval loss when there is no --eval-data "
        "(chosen by a keyed hash of each line; 0: no eval loss)",
    )
    epochs: int = Field(1, ge=1, description="passes over the training conversations")
    batch_size: int = Field(8, ge=1, description="conversations per optimizer step")
    learning_rate: float = Field(1e-4, gt=0.0, description="Adam learning rate")
    eval_every: int = Field(
        0, ge=0, description="steps between eval-loss measurements (0: after each epoch)"
    )
