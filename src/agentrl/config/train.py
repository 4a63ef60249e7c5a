"""`TrainConfig`: one training run (defaults: the published ALFWorld recipe)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from agentrl.algo.advantages import AdvantageEstimator
from agentrl.algo.rewards import Reward
from agentrl.algo.schedule import LRSchedule, scheduled_learning_rate
from agentrl.backends.base import (
    AdamParams,
    KLEstimator,
    LossConfig,
    LossName,
    LossNormalisation,
    MaskMode,
)
from agentrl.config.common import CommonConfig, must_not_be
from agentrl.config.names import (
    BackendName,
    BehaviourLogprobs,
    DistillSignal,
    EstimatorName,
    Objective,
    StalePolicy,
)
from agentrl.config.plugins import EstimatorOptions, make_estimator
from agentrl.config.presets import CPU_SMALL_COMMON, CPU_SMALL_TRAIN

__all__ = ["DEFAULT_DUAL_CLIP", "TrainConfig"]

DEFAULT_DUAL_CLIP = 3.0
"""The dual-clip cap off-policy training uses unless told otherwise (verl's default)."""


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
    lr_schedule: LRSchedule = Field(
        LRSchedule.CONSTANT,
        description="learning rate over the updates: constant, or linear / cosine from "
        "--learning-rate at update 1 to --final-learning-rate at --max-steps",
    )
    final_learning_rate: float | None = Field(
        None,
        gt=0.0,
        description="the rate a linear or cosine --lr-schedule reaches at the last update "
        "(default: a tenth of --learning-rate)",
    )
    warmup_updates: int = Field(
        0,
        ge=0,
        description="updates over which the learning rate rises linearly to its schedule's "
        "(1/N of it at update 1; 0: none)",
    )
    beta1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam beta1")
    beta2: float = Field(0.95, ge=0.0, lt=1.0, description="Adam beta2")
    adam_eps: float = Field(1e-8, gt=0.0, description="Adam epsilon")
    weight_decay: float = Field(0.0, ge=0.0, description="decoupled weight decay")
    grad_clip_norm: float = Field(
        1.0, ge=0.0, description="clip the global gradient norm to this (0 disables)"
    )
    optim_substeps: int = Field(
        1,
        ge=1,
        description="optimizer steps per update: the batch's trajectories in this many "
        "consecutive parts, one forward_backward and one optim_step each (1: the recipe)",
    )
    objective: Objective = Field(
        Objective.RL,
        description="what updates train on: rl (advantages, the recipe), rft (cross entropy "
        "on the won trajectories), opd (on-policy distillation of --teacher-model) or opsd "
        "(self-distillation: the model shown the env's privileged context); opd and opsd use "
        "the importance_sampling loss unless --loss is given",
    )
    teacher_model: str | None = Field(
        None,
        description="--objective opd: the teacher (a checkpoint record, a local checkpoint "
        "folder or a trio:// path) of the same base model and tokenizer",
    )
    teacher_kl_coef: float = Field(
        1.0, ge=0.0, description="opd / opsd: weight of the per-token teacher - student gap"
    )
    teacher_reward_coef: float = Field(
        0.0, ge=0.0, description="opd / opsd: weight of the reward's advantage (0: pure)"
    )
    teacher_advantage_clip: float | None = Field(
        None,
        gt=0.0,
        description="opd / opsd: bound on each token's teacher - student gap (default: none)",
    )
    teacher_signal: DistillSignal = Field(
        DistillSignal.REVERSE_KL,
        description="opd: reverse_kl (advantage teacher - student logprob of the student's "
        "token, the configured loss) or teacher_tokens (cross entropy towards the teacher's "
        "most likely token at every trained position; a local or PyTRIO/Tinker teacher)",
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
        None,
        ge=0.0,
        description="local: truncated importance weight cap (trainer / sampler), off by "
        "default; with --async-rollouts it makes the loss decoupled PPO; 0 disables",
    )
    dual_clip: float | None = Field(
        None,
        ge=0.0,
        description="local: cap the ratio of negative-advantage tokens at C (dual-clip PPO); "
        "default: 3 when off-policy (--max-steps-off-policy >= 1, or --async-rollouts with "
        "--max-staleness >= 1), else off; 0 disables",
    )
    max_steps_off_policy: int = Field(
        0, ge=0, description="k: sample up to k updates ahead while training (0: synchronous)"
    )
    stale_groups: StalePolicy = Field(
        StalePolicy.DROP,
        description="a group older than k updates (or --max-staleness): drop or resample",
    )
    async_rollouts: bool = Field(
        False,
        description="generate continuously (partial rollouts): each turn samples the newest "
        "weights, an update trains the first games_per_batch groups to finish, bounded by "
        "--max-staleness (replaces --max-steps-off-policy)",
    )
    max_staleness: int = Field(
        1,
        ge=0,
        description="--async-rollouts: the most updates a trained token may lag the weights "
        "it trains (0: exactly the synchronous run)",
    )
    agent: str | None = Field(
        None,
        description="train an agent written without agentrl: MODULE:FUNCTION or FILE.py:FUNCTION, "
        "an async function (endpoint, task) -> reward that calls the OpenAI-compatible gateway "
        "(docs/gateway.md); its tasks: --env agent (the module's TASKS) or any env's",
    )
    agent_timeout: float = Field(
        600.0, gt=0, description="--agent: seconds one episode may run before it is cancelled"
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

    @classmethod
    def preset_defaults(cls) -> Mapping[str, object]:
        """The cpu-small defaults of the shared and the training fields."""
        return {**CPU_SMALL_COMMON, **CPU_SMALL_TRAIN}

    @field_validator("run_dir")
    @classmethod
    def _check_run_dir(cls, value: Path) -> Path:
        must_not_be(value, "file", "a run folder")
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

    @model_validator(mode="before")
    @classmethod
    def _distillation_loss(cls, data: Any) -> Any:
        """`--objective opd` trains with the importance-sampling loss unless `--loss` says."""
        if isinstance(data, dict) and str(data.get("objective", "")) in ("opd", "opsd"):
            return {"loss": LossName.IMPORTANCE_SAMPLING, **data}
        return data

    @model_validator(mode="after")
    def _check_objective(self) -> Self:
        opd = self.objective is Objective.OPD
        if opd and self.teacher_model is None:
            raise ValueError(
                "--objective opd needs --teacher-model (a checkpoint record of the same base "
                "model, e.g. runs/teacher/checkpoints/update-0040.json)"
            )
        if not opd and self.teacher_model is not None:
            raise ValueError("--teacher-model is the teacher of --objective opd only")
        if self.teacher_signal is DistillSignal.TEACHER_TOKENS:
            if not opd:
                raise ValueError(
                    "--teacher-signal teacher_tokens needs --objective opd (a teacher model "
                    "that names its most likely tokens; opsd's privileged teacher only scores)"
                )
            if self.teacher_reward_coef or self.teacher_advantage_clip is not None:
                raise ValueError(
                    "--teacher-signal teacher_tokens trains cross entropy on the teacher's "
                    "labels: leave out --teacher-reward-coef and --teacher-advantage-clip"
                )
        if self.objective is not Objective.RL and (self.stream_groups or self.agent):
            what = "--stream-groups" if self.stream_groups else "--agent"
            raise ValueError(
                f"--objective {self.objective.value} trains on the whole batch played by the "
                f"rollout engine: leave out {what}"
            )
        return self

    @model_validator(mode="after")
    def _check_streaming(self) -> Self:
        if not self.stream_groups:
            return self
        if self.optim_substeps > 1:
            raise ValueError(
                f"--stream-groups and --optim-substeps {self.optim_substeps} cannot be combined: "
                "a streamed batch ends in one optimizer step; pick one"
            )
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
    def _check_async(self) -> Self:
        if not self.async_rollouts:
            return self
        clash = []
        if self.max_steps_off_policy > 0:
            clash.append(f"--max-steps-off-policy {self.max_steps_off_policy} (async replaces it)")
        if self.stream_groups:
            clash.append("--stream-groups (an async update's groups are known only when done)")
        if self.dynamic_sampling_budget > 0:
            clash.append("--dynamic-sampling-budget (not implemented for async rollouts)")
        if clash:
            raise ValueError(
                f"--async-rollouts cannot be combined with {'; '.join(clash)}; drop them, or "
                "use --no-async-rollouts"
            )
        return self

    @model_validator(mode="after")
    def _check_schedule(self) -> Self:
        if self.final_learning_rate is not None and self.lr_schedule is LRSchedule.CONSTANT:
            raise ValueError(
                "--final-learning-rate is the end of a schedule: add --lr-schedule linear or "
                "--lr-schedule cosine, or drop it"
            )
        return self

    @model_validator(mode="after")
    def _check_dual_clip(self) -> Self:
        if self.dual_clip is not None and 0 < self.dual_clip <= 1:
            raise ValueError(
                f"--dual-clip must be 0 (off) or above 1 (the ratio cap), got {self.dual_clip}"
            )
        return self

    @model_validator(mode="after")
    def _check_remote_loss(self) -> Self:
        if self.backend is BackendName.LOCAL:
            return self
        local_only = []
        if self.kl_coef > 0:
            local_only.append("--kl-coef")
        if self.tis_cap:
            local_only.append("--tis-cap")
        if self.dual_clip:
            local_only.append("--dual-clip")
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

    def scheduled_learning_rate(self, update: int) -> float:
        """The learning rate of update `update` (1-based) under `lr_schedule` over
        `max_steps` updates, after `warmup_updates` of warmup (`agentrl.algo.schedule`)."""
        final = self.final_learning_rate or self.learning_rate / 10
        return scheduled_learning_rate(
            self.lr_schedule,
            self.learning_rate,
            final,
            update,
            self.max_steps,
            self.warmup_updates,
        )

    def adam_params(self, update: int = 1) -> AdamParams:
        """Optimizer step parameters of update `update` (its scheduled learning rate)."""
        return AdamParams(
            learning_rate=self.scheduled_learning_rate(update),
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
            tis_cap=self.tis_cap or None,
            dual_clip=self.resolved_dual_clip(),
        )

    @property
    def off_policy(self) -> bool:
        """Whether trained tokens may come from older weights: k-step pipelining (k >= 1) or
        asynchronous rollouts with `max_staleness >= 1`."""
        return self.max_steps_off_policy >= 1 or (self.async_rollouts and self.max_staleness >= 1)

    def resolved_dual_clip(self) -> float | None:
        """The dual-clip cap in use: the given one (0: off), else `DEFAULT_DUAL_CLIP` when
        training off-policy on the local backend (the services have no such setting)."""
        if self.dual_clip is not None:
            return self.dual_clip or None
        if self.off_policy and self.backend is BackendName.LOCAL:
            return DEFAULT_DUAL_CLIP
        return None

    def advantage_estimator(self, reward_fn: Reward | None = None) -> AdvantageEstimator:
        """The configured advantage estimator (step-level ones score turns with `reward_fn`,
        default: the configured reward)."""
        options = EstimatorOptions(
            gigpo_gamma=self.gigpo_gamma,
            gigpo_omega=self.gigpo_omega,
            gigpo_normalize_step=self.gigpo_normalize_step,
        )
        return make_estimator(self.estimator.value, options, reward_fn or self.reward_fn())
