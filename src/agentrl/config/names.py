"""The names a config chooses from: backends, estimators, rewards, environments, trackers,
samplers, evaluation splits and players (`StrEnum`s; the command line's choices)."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "BackendName",
    "BehaviourLogprobs",
    "EnvEngine",
    "EnvName",
    "EstimatorName",
    "EvalPolicy",
    "EvalSplit",
    "Objective",
    "Preset",
    "RewardName",
    "SamplerName",
    "SandboxMode",
    "StalePolicy",
    "SwanLabMode",
    "WandbMode",
]


class BackendName(StrEnum):
    """Training / sampling backends."""

    PYTRIO = "pytrio"
    LOCAL = "local"
    TINKER = "tinker"


class Preset(StrEnum):
    """Defaults sized to the model (flags given explicitly always win)."""

    AUTO = "auto"
    """cpu-small for `--base-model tiny` or `--backend local --device cpu`, else recipe."""
    RECIPE = "recipe"
    """The published 4B recipe's budgets (8 games x 8, 50 steps, 2,048 tokens per reply)."""
    CPU_SMALL = "cpu-small"
    """A run a CPU finishes in seconds per update (2 games x 4, 8 steps, 64 tokens per reply)."""


class EstimatorName(StrEnum):
    """Built-in advantage estimators (see `agentrl.config.plugins.ESTIMATORS`)."""

    GROUP_MEAN = "group_mean"
    GROUP_NORMALIZED = "group_normalized"
    LEAVE_ONE_OUT = "leave_one_out"
    GIGPO = "gigpo"


class RewardName(StrEnum):
    """Built-in reward functions (see `agentrl.config.plugins.REWARDS`)."""

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


class Objective(StrEnum):
    """What an update trains on (`agentrl train --objective`)."""

    RL = "rl"
    """Policy-gradient RL: the estimator's advantages and the configured loss (the recipe)."""
    RFT = "rft"
    """Rejection-sampling fine-tuning: cross entropy on the kept (won) trajectories only."""
    OPD = "opd"
    """On-policy distillation: per token `kl_coef * (teacher - student)` (+ reward) from
    `--teacher-model`'s logprobs, with the importance-sampling loss."""
    OPSD = "opsd"
    """On-policy self-distillation: the teacher is the live model shown the env's privileged
    context (`EnvSpec.privileged`, e.g. the solution); otherwise as opd."""


class DistillSignal(StrEnum):
    """What a distillation teacher tells the student about each of its trained tokens
    (`agentrl train --teacher-signal`, `agentrl.training.distillation.Distillation.signal`)."""

    REVERSE_KL = "reverse_kl"
    """The teacher's logprob of the student's token: advantage `teacher - student` (the
    sampled reverse KL), trained with the configured policy loss (the series' OPD)."""
    TEACHER_TOKENS = "teacher_tokens"
    """The teacher's most likely token in the student's context: cross entropy towards it
    at every trained position (on-policy imitation, DAgger-style hard labels)."""


class StalePolicy(StrEnum):
    """What off-policy pipelining does with a group sampled more than k updates ago."""

    DROP = "drop"
    """Leave it out of the update (the update trains on fewer groups)."""
    RESAMPLE = "resample"
    """Play the same game again with the newest sampler, in place of the stale group."""


class EnvName(StrEnum):
    """The environments agentrl ships (kept for old code: `config.env` is now the name of any
    installed env, see `agentrl.config.plugins.env_names`; `EnvName.TOY == "toy"`)."""

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
    NOSEARCH = "nosearch"


class SandboxMode(StrEnum):
    """How model-written code is isolated (the pycode env's `run_python`)."""

    STRICT = "strict"
    """Kernel-enforced: bubblewrap namespaces, seccomp, a tmpfs working folder (the default);
    refuses to run where the host cannot give it."""
    UNSAFE_PROCESSES = "unsafe-processes"
    """Plain processes under rlimits and an audit hook: code can escape it. Only for hosts
    without user namespaces, and only when asked for."""
