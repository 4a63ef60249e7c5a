"""`CommonConfig`: the knobs training and evaluation share (model, tokenizer and chat template,
environment, budgets, sampling, reward, trackers)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentrl.algo.rewards import RewardFn
from agentrl.backends.base import SamplingParams
from agentrl.config.names import (
    BackendName,
    EnvEngine,
    Preset,
    RewardName,
    SamplerName,
    SandboxMode,
    SwanLabMode,
    WandbMode,
)
from agentrl.config.plugins import RewardOptions, make_reward
from agentrl.config.presets import CPU_SMALL_COMMON, apply_preset
from agentrl.core.types import CutReply, StepCounting
from agentrl.executors.options import ExecutorKind

__all__ = ["CommonConfig", "must_not_be"]


def must_not_be(path: Path, kind: str, wanted: str) -> None:
    """Refuse a path that exists as the wrong kind ("is a file, not a folder")."""
    wrong = path.is_file() if kind == "file" else path.is_dir()
    if wrong:
        raise ValueError(f"{path} is a {kind}, not {wanted}")


class CommonConfig(BaseModel):
    """Knobs shared by training and evaluation."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False
    )

    preset: Preset = Field(
        Preset.AUTO,
        description="defaults sized to the model: recipe (the published 4B recipe), cpu-small "
        "(2 games x 4, 8 steps, 64 tokens/reply, local backend), auto (cpu-small for "
        "--base-model tiny or --backend local --device cpu); given flags always win",
    )
    base_model: str = Field(
        "Qwen/Qwen3.5-4B",
        description="base model name or local path ('tiny' = the local backend's test model)",
    )
    backend: BackendName = Field(
        BackendName.PYTRIO, description="training/sampling backend: pytrio, local or tinker"
    )
    tokenizer_path: Path | None = Field(
        None, description="local tokenizer folder (default: load the base model's tokenizer)"
    )
    chat_template: Path | None = Field(
        None,
        description="Jinja chat template file to render prompts with (default: the tokenizer's)",
    )
    enable_thinking: bool = Field(
        False, description="thinking mode (Qwen3, Qwen3.5, Qwen3-Thinking-2507): sample reasoning"
    )
    tool_dialect: str | None = Field(
        None,
        description="tool-call dialect (qwen_json, qwen_xml, llama3_json, deepseek_v3, glm4, "
        "harmony, kimi_k2; default: detected from the chat template)",
    )
    allow_history_rewrite: bool = Field(
        False, description="extend prompts even where the chat template rewrites earlier turns"
    )
    device: str = Field("auto", description="torch device for the local backend (auto, cpu, cuda)")
    env: str = Field(
        "alfworld",
        description="environment: the name of an installed env (`agentrl envs` lists them: "
        "alfworld, toy, pycode, and any package's)",
    )
    data_root: Path | None = Field(
        None, description="ALFWorld data root (default: $ALFWORLD_DATA, then the alfworld cache)"
    )
    env_engine: EnvEngine = Field(
        EnvEngine.FAST, description="ALFWorld environment engine: fast (default) or textworld"
    )
    env_workers: int | None = Field(
        None,
        ge=0,
        description="persistent ALFWorld worker processes shared by all groups and updates "
        "(default: one per CPU; 0: a fresh worker process per group)",
    )
    env_executor: ExecutorKind = Field(
        ExecutorKind.INPROCESS,
        description="where env groups run: inprocess (the trainer's event loop), process (local "
        "worker processes) or ray (actors on a Ray cluster, `pip install 'agentrl[ray]'`)",
    )
    env_groups_in_flight: int | None = Field(
        None,
        ge=1,
        description="process and ray executors: the most env groups in flight (workers or "
        "actors alive); default: one per CPU of the machine, or of the cluster per --env-cpus",
    )
    ray_address: str | None = Field(
        None,
        description="ray executor: the cluster (auto, HOST:PORT; default: $RAY_ADDRESS, else a "
        "cluster `ray start` runs here, else a new local Ray instance for the run)",
    )
    env_cpus: float = Field(
        1.0, ge=0.0, description="ray executor: CPUs each env group's actor reserves"
    )
    env_step_timeout: float = Field(
        300.0,
        gt=0.0,
        description="process and ray executors: seconds one env step may take before its "
        "worker is killed and the group's live branches end as env_error",
    )
    max_episode_steps: int = Field(50, ge=1, description="maximum env steps per trajectory")
    step_counting: StepCounting = Field(
        StepCounting.TURNS,
        description="what uses a step: turns (every reply, the recipe) or env_calls "
        "(only replies whose call reached the environment)",
    )
    cut_reply: CutReply = Field(
        CutReply.CONTINUE,
        description="a reply cut at --max-assistant-tokens: continue (invalid format, the "
        "episode goes on; the recipe) or end (the branch ends)",
    )
    max_trajectory_tokens: int = Field(
        12_000, ge=16, description="token budget of one trajectory (prompt + completions)"
    )
    max_assistant_tokens: int = Field(
        2_048, ge=1, description="maximum new tokens per assistant turn"
    )
    context_window: int | None = Field(
        None,
        ge=1,
        description="keep the first messages and only the last N turns in each prompt (a cut "
        "prompt starts a new training segment; default: the whole history, the recipe)",
    )
    context_slack: int = Field(
        0,
        ge=0,
        description="with --context-window N: let the prompt grow by this many turns before "
        "it is cut back to N (fewer re-rendered prompts; 0: cut every turn past N)",
    )
    context_summary: bool = Field(
        False,
        description="with --context-window N: before each cut the model writes a summary of "
        "the episode (a sampled, trained turn) that later prompts hold",
    )
    context_summary_tokens: int = Field(
        256, ge=1, description="with --context-summary: the most tokens of one summary"
    )
    temperature: float = Field(1.0, ge=0.0, description="sampling temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling top-p, in (0, 1]")
    seed: int = Field(42, ge=0, description="random seed (game order, sampling, LoRA init)")
    show_admissible: bool = Field(
        True, description="list the admissible actions in the first user and each tool message"
    )
    win_reward: float = Field(1.0, description="reward for a won episode")
    invalid_penalty: float = Field(
        0.1, ge=0.0, description="reward penalty per invalid action (format or not admissible)"
    )
    call_penalty: float = Field(
        0.0, ge=0.0, description="pycode: reward penalty per run_python call (0: the recipe)"
    )
    sandbox: SandboxMode = Field(
        SandboxMode.STRICT,
        description="pycode: isolation of model-written code; unsafe-processes can be escaped",
    )
    reward: RewardName = Field(RewardName.WIN_MINUS_INVALID, description="reward function")
    swanlab_mode: SwanLabMode = Field(
        SwanLabMode.DISABLED, description="SwanLab tracking: online, offline, local or disabled"
    )
    swanlab_project: str = Field("agentrl", min_length=1, description="SwanLab project name")
    max_in_flight: int = Field(
        64, ge=1, description="pytrio/tinker: sampling requests in flight at once"
    )
    experiment_name: str | None = Field(
        None,
        description="run name in SwanLab, W&B and logs (default: derived from the output path)",
    )
    # -- W&B and the vLLM sampler (issue 16) --
    wandb_mode: WandbMode = Field(
        WandbMode.DISABLED, description="Weights & Biases tracking: online, offline or disabled"
    )
    wandb_project: str = Field("agentrl", min_length=1, description="W&B project name")
    sampler: SamplerName = Field(
        SamplerName.BUILTIN,
        description="local backend: who samples: builtin (transformers loop) or vllm",
    )
    vllm_gpu_memory_utilization: float = Field(
        0.5, gt=0.0, le=1.0, description="vllm sampler: fraction of GPU memory vLLM may take"
    )

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return apply_preset(data, cls.preset_defaults(), cls.model_fields)

    @classmethod
    def preset_defaults(cls) -> Mapping[str, object]:
        """The cpu-small defaults of this config's fields (`agentrl.config.presets`)."""
        return CPU_SMALL_COMMON

    @field_validator("chat_template")
    @classmethod
    def _check_template(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value}: no such chat template file")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _check_env(cls, value: object) -> object:
        from agentrl.config.plugins import check_env_name

        name = value.value if isinstance(value, Enum) else value  # EnvName.TOY
        return check_env_name(name) if isinstance(name, str) else name

    @field_validator("tool_dialect")
    @classmethod
    def _check_dialect(cls, value: str | None) -> str | None:
        from agentrl.chat.dialects import DIALECTS

        if value is not None and value not in DIALECTS:
            raise ValueError(f"unknown dialect {value!r}; choose one of {', '.join(DIALECTS)}")
        return value

    @field_validator("device")
    @classmethod
    def _check_device(cls, value: str) -> str:
        if value not in ("auto", "cpu", "mps") and not value.startswith("cuda"):
            raise ValueError(f"device must be auto, cpu, mps, cuda or cuda:N, got {value!r}")
        return value

    @field_validator("data_root", "tokenizer_path")
    @classmethod
    def _check_folder(cls, value: Path | None) -> Path | None:
        if value is not None:
            must_not_be(value.expanduser(), "file", "a folder")
        return value

    @model_validator(mode="after")
    def _check_budgets(self) -> Self:
        if self.max_assistant_tokens >= self.max_trajectory_tokens:
            raise ValueError(
                f"max_assistant_tokens ({self.max_assistant_tokens}) must be smaller than "
                f"max_trajectory_tokens ({self.max_trajectory_tokens}): one turn must fit in "
                "the trajectory budget"
            )
        if self.context_summary and self.context_window is None:
            raise ValueError(
                "context_summary needs --context-window N: a summary is written when the "
                "window cuts earlier turns"
            )
        if self.context_slack and self.context_window is None:
            raise ValueError(
                f"context_slack ({self.context_slack}) needs --context-window N: the slack is "
                "how far a windowed prompt may grow before it is cut back to N turns"
            )
        return self

    def sampling_params(self, stop_tokens: tuple[int, ...] = ()) -> SamplingParams:
        """Sampling parameters for one assistant turn."""
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_assistant_tokens,
            stop_tokens=stop_tokens,
            seed=self.seed,
        )

    def reward_fn(self) -> RewardFn:
        """The configured reward function, unless the env's `EnvSpec` gives one (pycode with a
        `call_penalty`: `PycodeReward`)."""
        from agentrl.config.plugins import env_spec

        own = env_spec(self.env).reward_for(self)
        if own is not None:
            return own
        return make_reward(
            self.reward.value,
            RewardOptions(win_reward=self.win_reward, invalid_penalty=self.invalid_penalty),
        )
