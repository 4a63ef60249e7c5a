"""Training and evaluation configs: pydantic v2 models with the published recipe's defaults.

Every field has a one-line description (used by `agentrl train --help` / `agentrl eval --help`)
and unknown fields are rejected. Field names follow the familiar command-line flags
(`max_steps` is `--max-steps`, the number of training updates). Components chosen by name
(backend, estimator, reward) are built by `agentrl.registry` or by their plug-in; Python users
may pass objects to the trainer instead.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentrl.algo.advantages import AdvantageEstimator
from agentrl.algo.rewards import RewardFn
from agentrl.backends.base import (
    AdamParams,
    KLEstimator,
    LossConfig,
    LossName,
    LossNormalisation,
    MaskMode,
    SamplingParams,
)
from agentrl.core.types import CutReply, StepCounting
from agentrl.registry import EstimatorOptions, RewardOptions, make_estimator, make_reward

__all__ = [
    "BackendName",
    "BehaviourLogprobs",
    "CommonConfig",
    "EnvEngine",
    "EnvName",
    "EstimatorName",
    "EvalConfig",
    "EvalPolicy",
    "EvalSplit",
    "RewardName",
    "SamplerName",
    "StalePolicy",
    "SwanLabMode",
    "TrainConfig",
    "WandbMode",
]


def _must_not_be(path: Path, kind: str, wanted: str) -> None:
    """Refuse a path that exists as the wrong kind ("is a file, not a folder")."""
    wrong = path.is_file() if kind == "file" else path.is_dir()
    if wrong:
        raise ValueError(f"{path} is a {kind}, not {wanted}")


class BackendName(StrEnum):
    """Training / sampling backends."""

    PYTRIO = "pytrio"
    LOCAL = "local"
    TINKER = "tinker"


class EstimatorName(StrEnum):
    """Built-in advantage estimators (see `agentrl.registry.ESTIMATORS`)."""

    GROUP_MEAN = "group_mean"
    GROUP_NORMALIZED = "group_normalized"
    LEAVE_ONE_OUT = "leave_one_out"
    GIGPO = "gigpo"


class RewardName(StrEnum):
    """Built-in reward functions (see `agentrl.registry.REWARDS`)."""

    WIN_MINUS_INVALID = "win_minus_invalid"


class SwanLabMode(StrEnum):
    """SwanLab tracking modes (`disabled` logs nothing to SwanLab; JSONL is always written)."""

    ONLINE = "online"
    OFFLINE = "offline"
    LOCAL = "local"
    DISABLED = "disabled"


class WandbMode(StrEnum):
    """Weights & Biases tracking modes (`disabled` logs nothing to W&B; JSONL is always written)."""

    ONLINE = "online"
    OFFLINE = "offline"
    DISABLED = "disabled"


class SamplerName(StrEnum):
    """Who samples on the local backend (training is always torch + peft)."""

    BUILTIN = "builtin"
    """The local backend's own transformers loop with KV-cache reuse."""
    VLLM = "vllm"
    """vLLM's async engine (prefix caching, LoRA per request; `pip install 'agentrl[vllm]'`)."""


class BehaviourLogprobs(StrEnum):
    """Which logprobs of the sampled tokens the PPO ratio divides by."""

    SAMPLER = "sampler"
    """The sampler's own logprobs (the recipe)."""
    TRAINER = "trainer"
    """The trainer's recomputed logprobs of the same weights before the update."""


class StalePolicy(StrEnum):
    """What off-policy pipelining does with a group sampled more than k updates ago."""

    DROP = "drop"
    """Leave it out of the update (the update trains on fewer groups)."""
    RESAMPLE = "resample"
    """Play the same game again with the newest sampler, in place of the stale group."""


class EnvName(StrEnum):
    """Environments the command line can build (Python users pass any `EnvGroupFactory`)."""

    ALFWORLD = "alfworld"
    TOY = "toy"
    PYCODE = "pycode"


class EnvEngine(StrEnum):
    """ALFWorld environment engines (`textworld` is the stock reference engine)."""

    TEXTWORLD = "textworld"
    FAST = "fast"


class EvalSplit(StrEnum):
    """Which validation games to evaluate."""

    VALID_SEEN = "valid_seen"
    VALID_UNSEEN = "valid_unseen"
    ALL = "all"

    @property
    def splits(self) -> tuple[str, ...]:
        """The data splits this choice covers."""
        if self is EvalSplit.ALL:
            return (EvalSplit.VALID_SEEN.value, EvalSplit.VALID_UNSEEN.value)
        return (self.value,)


class EvalPolicy(StrEnum):
    """Who plays the evaluation games."""

    MODEL = "model"
    PLANNER = "planner"
    SOLVER = "solver"


class CommonConfig(BaseModel):
    """Knobs shared by training and evaluation."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False
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
    env: EnvName = Field(
        EnvName.ALFWORLD, description="environment: alfworld, or toy (tiny built-in task)"
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

    @field_validator("chat_template")
    @classmethod
    def _check_template(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value}: no such chat template file")
        return value

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
            _must_not_be(value.expanduser(), "file", "a folder")
        return value

    @model_validator(mode="after")
    def _check_budgets(self) -> Self:
        if self.max_assistant_tokens >= self.max_trajectory_tokens:
            raise ValueError(
                f"max_assistant_tokens ({self.max_assistant_tokens}) must be smaller than "
                f"max_trajectory_tokens ({self.max_trajectory_tokens}): one turn must fit in "
                "the trajectory budget"
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
        """The configured reward function (pycode with a `call_penalty`: `PycodeReward`)."""
        if self.env is EnvName.PYCODE and self.call_penalty > 0:
            from agentrl.envs.pycode import PycodeReward

            return PycodeReward(self.win_reward, self.invalid_penalty, self.call_penalty)
        return make_reward(
            self.reward.value,
            RewardOptions(win_reward=self.win_reward, invalid_penalty=self.invalid_penalty),
        )


class TrainConfig(CommonConfig):
    """Configuration of one training run (defaults: the published ALFWorld recipe)."""

    max_steps: int = Field(80, ge=1, description="number of training updates (optimizer steps)")
    games_per_batch: int = Field(8, ge=1, description="games (groups) per update")
    group_size: int = Field(8, ge=1, description="trajectories per game (K branches)")
    max_concurrent_games: int | None = Field(
        None, ge=1, description="games rolled out at once (default: the whole batch)"
    )
    train_split: str = Field("train", min_length=1, description="data split to train on")
    lora_rank: int = Field(32, ge=1, le=512, description="LoRA rank")
    learning_rate: float = Field(1e-6, gt=0.0, description="Adam learning rate")
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam beta1")
    beta2: float = Field(0.95, ge=0.0, lt=1.0, description="Adam beta2")
    adam_eps: float = Field(1e-8, gt=0.0, description="Adam epsilon")
    weight_decay: float = Field(0.0, ge=0.0, description="decoupled weight decay")
    grad_clip_norm: float = Field(
        1.0, ge=0.0, description="clip the global gradient norm to this (0 disables)"
    )
    loss: LossName = Field(
        LossName.PPO,
        description="policy loss: ppo, importance_sampling, cispo, gspo or cross_entropy",
    )
    clip_low: float = Field(
        0.8, gt=0.0, le=1.0, description="lower ratio clip threshold (ppo, cispo, gspo)"
    )
    clip_high: float = Field(
        1.2, ge=1.0, description="upper ratio clip threshold (above 1.2: clip-higher)"
    )
    normalisation: LossNormalisation = Field(
        LossNormalisation.TOKENS,
        description="local: loss divided by trained tokens, datums (sequence) or norm_constant",
    )
    norm_constant: float | None = Field(
        None,
        gt=0.0,
        description="divisor for --normalisation constant (default: trajectories per update "
        "x max_trajectory_tokens)",
    )
    kl_coef: float = Field(
        0.0, ge=0.0, description="local: KL penalty to the base model (adapter off); 0 disables"
    )
    kl_estimator: KLEstimator = Field(KLEstimator.K3, description="KL estimator: k1 or k3")
    tis_cap: float | None = Field(
        None, gt=0.0, description="local: truncated importance weight cap (trainer / sampler)"
    )
    max_steps_off_policy: int = Field(
        0, ge=0, description="k: sample up to k updates ahead while training (0: synchronous)"
    )
    stale_groups: StalePolicy = Field(
        StalePolicy.DROP, description="a group older than k updates: drop or resample"
    )
    dynamic_sampling_budget: int = Field(
        0, ge=0, description="extra games per update to replace degenerate groups (DAPO; 0: off)"
    )
    stream_groups: bool = Field(
        False,
        description="train each game's group as soon as it is played, while the rest of the "
        "update is still rolled out; one optimizer step on the whole batch (local, tinker)",
    )
    estimator: EstimatorName = Field(
        EstimatorName.GROUP_MEAN,
        description="advantage estimator: group_mean, group_normalized, leave_one_out or gigpo",
    )
    gigpo_gamma: float = Field(0.95, ge=0.0, le=1.0, description="GiGPO step-return discount")
    gigpo_omega: float = Field(1.0, ge=0.0, description="GiGPO weight of the step advantage")
    gigpo_normalize_step: bool = Field(
        False, description="GiGPO: divide step advantages by their anchor group's std"
    )
    save_every: int = Field(20, ge=1, description="save a checkpoint every N updates (and at end)")
    run_dir: Path = Field(
        Path("runs/train"), description="folder for checkpoints, metrics JSONL and logs"
    )
    resume: bool = Field(
        False, description="continue from the latest checkpoint in run_dir (same game order)"
    )
    save_rollouts: bool = Field(
        True, description="append every update's trajectories (text) to run_dir/rollouts.jsonl"
    )
    mask_mode: MaskMode = Field(
        MaskMode.ZERO_ADVANTAGE,
        description="pytrio/tinker: how masked tokens reach the loss: zero_advantage (every "
        "token in the denominator; the recipe, tuned with lr 1e-6) or ignore_index (-100 "
        "targets: only assistant tokens count; pytrio only)",
    )
    behaviour_logprobs: BehaviourLogprobs = Field(
        BehaviourLogprobs.SAMPLER,
        description="PPO behaviour logprobs: sampler (as sampled) or trainer (recomputed by "
        "the training forward pass before the update)",
    )
    remote_recovery: bool = Field(
        True,
        description="pytrio/tinker: save a temporary training state after every update so a "
        "broken training client is rebuilt losing at most the current update",
    )
    resume_fallback: bool = Field(
        False,
        description="on resume, set a damaged latest checkpoint aside and use the previous one",
    )

    @field_validator("run_dir")
    @classmethod
    def _check_run_dir(cls, value: Path) -> Path:
        _must_not_be(value, "file", "a run folder")
        return value

    @model_validator(mode="after")
    def _check_groups(self) -> Self:
        if self.group_size < 2 and self.estimator is not EstimatorName.GIGPO:
            raise ValueError(
                f"group_size={self.group_size} gives every trajectory a zero advantage with the "
                f"{self.estimator.value!r} estimator (a group of one is its own baseline); "
                "use group_size >= 2"
            )
        return self

    @model_validator(mode="after")
    def _check_streaming(self) -> Self:
        if not self.stream_groups:
            return self
        if self.max_steps_off_policy > 0:
            raise ValueError(
                f"--stream-groups and --max-steps-off-policy {self.max_steps_off_policy} cannot "
                "be combined: with k >= 1 an update's rollout runs while the previous update "
                "trains, so its groups cannot start the next gradient yet; pick one (k = 0 "
                "with --stream-groups, or --no-stream-groups)"
            )
        if self.backend is BackendName.PYTRIO:
            raise ValueError(
                "--stream-groups needs forward_backward calls that add up to one batch's "
                "gradient; pytrio normalises each call by its own token totals, so streamed "
                "groups would be weighted wrongly; use --no-stream-groups with --backend "
                "pytrio (or --backend local / tinker)"
            )
        return self

    @model_validator(mode="after")
    def _check_remote_loss(self) -> Self:
        if self.backend is BackendName.LOCAL:
            return self
        local_only = []
        if self.kl_coef > 0:
            local_only.append("--kl-coef")
        if self.tis_cap is not None:
            local_only.append("--tis-cap")
        if self.normalisation is not LossNormalisation.TOKENS:
            local_only.append(f"--normalisation {self.normalisation.value}")
        if self.loss is LossName.GSPO and self.backend is BackendName.PYTRIO:
            local_only.append("--loss gspo (pytrio 0.2.9 has no server-side gspo; tinker has)")
        if local_only:
            raise ValueError(
                f"the {self.backend.value} service computes the loss server-side and has no "
                f"setting for {', '.join(local_only)}; use --backend local, or drop them"
            )
        return self

    def adam_params(self) -> AdamParams:
        """Optimizer step parameters."""
        return AdamParams(
            learning_rate=self.learning_rate,
            beta1=self.beta1,
            beta2=self.beta2,
            eps=self.adam_eps,
            weight_decay=self.weight_decay,
            grad_clip_norm=self.grad_clip_norm,
        )

    def loss_config(self) -> LossConfig:
        """Loss hyper-parameters (clip thresholds, normalisation, KL penalty, TIS cap)."""
        constant = self.norm_constant
        if constant is None and self.normalisation is LossNormalisation.CONSTANT:
            constant = float(self.games_per_batch * self.group_size * self.max_trajectory_tokens)
        return LossConfig(
            clip_low=self.clip_low,
            clip_high=self.clip_high,
            normalisation=self.normalisation,
            norm_constant=constant,
            kl_coef=self.kl_coef,
            kl_estimator=self.kl_estimator,
            tis_cap=self.tis_cap,
        )

    def advantage_estimator(self, reward_fn: RewardFn | None = None) -> AdvantageEstimator:
        """The configured advantage estimator (step-level ones score turns with `reward_fn`,
        default: the configured reward)."""
        options = EstimatorOptions(
            gigpo_gamma=self.gigpo_gamma,
            gigpo_omega=self.gigpo_omega,
            gigpo_normalize_step=self.gigpo_normalize_step,
        )
        return make_estimator(self.estimator.value, options, reward_fn or self.reward_fn())


class EvalConfig(CommonConfig):
    """Configuration of one evaluation (defaults: the published recipe's evaluation)."""

    output: Path = Field(description="eval JSONL file to write (episodes and summaries)")
    policy: EvalPolicy = Field(
        EvalPolicy.MODEL,
        description="who plays: the model, the planner baseline (alfworld) or the solver "
        "baseline (pycode)",
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
        _must_not_be(value, "folder", "a .jsonl file")
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
        if self.policy is EvalPolicy.PLANNER and self.model_path is not None:
            raise ValueError(
                "model_path is set but policy is 'planner': the planner baseline uses no model; "
                "drop model_path or use policy 'model'"
            )
        return self
