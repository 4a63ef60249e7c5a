"""The parts `agentrl train` / `agentrl eval` (and the demo) build from a config, by name:
tokenizer, chat renderer, rollout budgets, credentials checks, training backend, eval sampler.

Python users may build any of them themselves and pass objects to `Trainer` /
`evaluate_tasks`. Heavy dependencies (torch, the PyTRIO SDK, vLLM) are imported only when the
part that needs them is built, with an error naming the extra to install. Which environment,
its tools and its games: `agentrl.training.recipe`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl.backends.base import Sampler, SamplingParams, Teacher, TrainingBackend
from agentrl.chat import ChatRenderer
from agentrl.config import (
    BackendName,
    BehaviourLogprobs,
    CommonConfig,
    EvalConfig,
    EvalPolicy,
    SamplerName,
    SwanLabMode,
    TrainConfig,
    WandbMode,
)
from agentrl.core.types import JsonObject
from agentrl.reporting.sinks import MetricSink, make_sinks
from agentrl.rollout import (
    ContextPolicy,
    FullHistory,
    RecentTurns,
    RolloutConfig,
    SummarizedTurns,
)
from agentrl.tools import ToolProtocol
from agentrl.training.checkpoints import METRICS_FILE, resolve_model_path

if TYPE_CHECKING:
    from agentrl.backends.local import DistributedContext, LocalBackend

__all__ = [
    "TINY_MODEL",
    "TINY_MODEL_SEED",
    "check_credentials",
    "context_policy",
    "distributed_for",
    "eval_sampler_for",
    "local_backend_for",
    "rank_config",
    "renderer_for",
    "renderer_for_tools",
    "rollout_config_for",
    "tokenizer_for",
    "train_sinks",
    "training_backend_for",
]

TINY_MODEL = "tiny"
"""`--base-model tiny`: a small random-initialised Qwen3-architecture model (local backend)."""

TINY_MODEL_SEED = 0
"""The tiny model's weights are always drawn with this seed, like a named checkpoint, so a
LoRA trained on it can be evaluated later whatever `--seed` says."""


def tokenizer_for(config: CommonConfig) -> Any:
    """`--tokenizer-path`, else the project's Qwen tokenizer for `tiny`, else the model's own.

    For `tiny` with `--chat-template`, the template's control tokens are added to the Qwen
    tokenizer (`agentrl.chat.tokenizers.add_template_tokens`), so any family's template works.

    The result is a `transformers` tokenizer (it satisfies `agentrl.chat.ChatTokenizer`).
    """
    from agentrl.chat import tokenizers

    if config.tokenizer_path is not None:
        return tokenizers.load_tokenizer(config.tokenizer_path)
    if config.base_model == TINY_MODEL:
        tokenizer = tokenizers.build_qwen_tokenizer()
        if config.chat_template is not None:  # the family's control tokens, one token each
            from agentrl.chat.dialects import DIALECTS

            markers = [m for d in DIALECTS.values() for m in (*d.reserved, *d.stop_markers)]
            template = config.chat_template.read_text(encoding="utf-8")
            tokenizers.add_template_tokens(tokenizer, template, markers)
        return tokenizer
    try:
        return tokenizers.load_tokenizer(config.base_model)
    except OSError as exc:
        raise OSError(
            f"{exc}\nFor --base-model {config.base_model} pass --tokenizer-path DIR (a folder "
            "with the model's tokenizer.json and chat template)."
        ) from None


def renderer_for(
    tokenizer: Any, protocol: ToolProtocol, config: CommonConfig | None = None
) -> ChatRenderer:
    """The chat renderer for `tokenizer` and the protocol's tools, with the config's chat
    template, thinking mode, tool dialect and history-rewrite choice (default: all off)."""
    return renderer_for_tools(tokenizer, protocol.tools, config)


def renderer_for_tools(
    tokenizer: Any, tools: Sequence[JsonObject], config: CommonConfig | None = None
) -> ChatRenderer:
    """`renderer_for` with the tools given as JSON schemas (the gateway: a request's tools)."""
    if config is None:
        return ChatRenderer(tokenizer, tools)
    template = None
    if config.chat_template is not None:
        template = config.chat_template.read_text(encoding="utf-8")
    try:
        return ChatRenderer(
            tokenizer,
            tools,
            chat_template=template,
            dialect=config.tool_dialect,
            enable_thinking=config.enable_thinking,
            allow_history_rewrite=config.allow_history_rewrite,
        )
    except ValueError as exc:
        source = config.chat_template or f"the tokenizer of {config.base_model}"
        raise ValueError(f"chat template ({source}): {exc}") from exc


def rollout_config_for(
    config: CommonConfig, group_size: int, sampling: SamplingParams
) -> RolloutConfig:
    """Budgets of the config with the given group size and sampling parameters."""
    return RolloutConfig(
        group_size=group_size,
        max_env_steps=config.max_episode_steps,
        max_trajectory_tokens=config.max_trajectory_tokens,
        max_assistant_tokens=config.max_assistant_tokens,
        step_counting=config.step_counting,
        cut_reply=config.cut_reply,
        sampling=sampling,
        context=context_policy(config),
    )


def context_policy(config: CommonConfig) -> ContextPolicy:
    """`--context-window N` (with `--context-slack`, `--context-summary`) as a policy; the
    whole history without."""
    if config.context_window is None:
        return FullHistory()
    if config.context_summary:
        return SummarizedTurns(
            config.context_window, config.context_slack, config.context_summary_tokens
        )
    return RecentTurns(config.context_window, config.context_slack)


def train_sinks(config: TrainConfig, *, console: bool = True) -> MetricSink:
    """The metric sinks of a training run: `<run_dir>/metrics.jsonl`, the console table (if
    `console`), and SwanLab / W&B as configured."""
    run_dir = Path(config.run_dir)
    return make_sinks(
        run_dir / METRICS_FILE,
        swanlab_mode=config.swanlab_mode,
        swanlab_project=config.swanlab_project,
        wandb_mode=config.wandb_mode,
        wandb_project=config.wandb_project,
        experiment_name=config.experiment_name or run_dir.name,
        config=config.model_dump(mode="json"),
        console=console,
    )


def check_credentials(config: CommonConfig) -> None:
    """Fail fast, before any heavy work, when a remote backend, SwanLab or W&B has no
    credentials."""
    planner = isinstance(config, EvalConfig) and config.policy is not EvalPolicy.MODEL
    if config.backend in (BackendName.PYTRIO, BackendName.TINKER) and not planner:
        from agentrl.backends.pytrio.sdk import sdk_for

        sdk_for(config.backend.value).check_api_key(None)
    if config.swanlab_mode is SwanLabMode.ONLINE:
        from agentrl.reporting.swanlab import has_credentials

        if not has_credentials():
            raise PermissionError(
                "--swanlab-mode online needs SwanLab credentials: run `swanlab login` or set "
                "SWANLAB_API_KEY (or use --swanlab-mode offline / local / disabled)"
            )
    if config.wandb_mode is WandbMode.ONLINE:
        from agentrl.reporting.wandb import has_credentials as wandb_credentials

        if not wandb_credentials():
            raise PermissionError(
                "--wandb-mode online needs W&B credentials: run `wandb login` or set "
                "WANDB_API_KEY (or use --wandb-mode offline / disabled)"
            )


def distributed_for(config: CommonConfig) -> DistributedContext | None:
    """This rank of a torchrun job (WORLD_SIZE > 1) training with `--backend local`; None
    for one process. Refused for the other backends (they train on a service)."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return None
    if config.backend is not BackendName.LOCAL:
        raise ValueError(
            f"torchrun (WORLD_SIZE={os.environ['WORLD_SIZE']}) trains with --backend local only "
            f"(got --backend {config.backend.value}); run one process for a remote backend"
        )
    from agentrl.backends.local import DistributedContext

    return DistributedContext.from_env(config.device)


def rank_config(config: TrainConfig) -> TrainConfig:
    """The config of this rank: as given on rank 0 (and for one process); rank r > 0 writes its
    run files (records, metrics, checkpoint records pointing at rank 0's checkpoints) under
    `<run_dir>/ranks/<r>` and logs to no tracking service: rank 0's run folder is the run's."""
    context = distributed_for(config)
    if context is None or context.is_main:
        return config
    return config.model_copy(
        update={
            "run_dir": Path(config.run_dir) / "ranks" / str(context.rank),
            "swanlab_mode": SwanLabMode.DISABLED,
            "wandb_mode": WandbMode.DISABLED,
        }
    )


def local_backend_for(
    config: CommonConfig,
    tokenizer: Any,
    checkpoint_dir: Path,
    lora_rank: int,
    lora_alpha: float | None = None,
    *,
    save_base_to: Path | None = None,
    distributed: DistributedContext | None = None,
) -> LocalBackend:
    """The local torch backend: the `tiny` random model, or a model from a path or HF cache.

    `save_base_to`: also write the `tiny` model's base weights and tokenizer there (what vLLM
    loads); with `--sampler vllm` the tiny model has head_dim 32 (vLLM's CPU minimum);
    `distributed`: this process is one rank of a data-parallel torchrun job."""
    from agentrl.backends.local import LocalBackend, LoraSpec

    lora = LoraSpec(rank=lora_rank) if lora_alpha is None else LoraSpec(lora_rank, lora_alpha)
    if config.base_model == TINY_MODEL:
        from agentrl.backends.local.model import qwen3_config, random_causal_lm, select_device

        device = select_device(config.device)
        shape = {"head_dim": 32} if config.sampler is SamplerName.VLLM else {}
        model_config = qwen3_config("tiny", vocab_size=len(tokenizer), **shape)  # type: ignore[arg-type]
        model = random_causal_lm(model_config, seed=TINY_MODEL_SEED, device=device)
        if save_base_to is not None:
            model.save_pretrained(str(save_base_to))
            tokenizer.save_pretrained(str(save_base_to))
        return LocalBackend(
            model,
            lora=lora,
            device=device,
            checkpoint_dir=checkpoint_dir,
            tokenizer=tokenizer,
            seed=config.seed,
            distributed=distributed,
        )
    return LocalBackend.from_pretrained(
        config.base_model,
        device=config.device,
        tokenizer=tokenizer,
        lora=lora,
        checkpoint_dir=checkpoint_dir,
        seed=config.seed,
        distributed=distributed,
    )


async def training_backend_for(config: TrainConfig, tokenizer: Any) -> TrainingBackend:
    """The configured training backend: a fresh LoRA run on the base model, or, for a remote
    service with `--resume` and a checkpoint in the run folder, ONE run restored from it."""
    if config.backend is BackendName.LOCAL:
        return _local_training_backend(config, tokenizer)
    if config.sampler is SamplerName.VLLM or config.behaviour_logprobs is BehaviourLogprobs.TRAINER:
        raise ValueError(
            "--sampler vllm and --behaviour-logprobs trainer need --backend local "
            f"(got --backend {config.backend.value})"
        )
    from agentrl.backends.pytrio import PyTrioBackend
    from agentrl.backends.pytrio.sdk import RECOVERY_TTL_SECONDS
    from agentrl.training.checkpoints import latest_checkpoint

    remote = {
        "tokenizer": tokenizer,
        "sdk": config.backend.value,
        "max_in_flight": config.max_in_flight,
        "mask_mode": config.mask_mode,
        "recovery_ttl_seconds": RECOVERY_TTL_SECONDS if config.remote_recovery else None,
    }
    latest = latest_checkpoint(config.run_dir) if config.resume else None
    if latest is not None:
        return await PyTrioBackend.resume(latest.state_path, base_model=config.base_model, **remote)
    return await PyTrioBackend.create(
        config.base_model, rank=config.lora_rank, seed=config.seed, **remote
    )


def _local_training_backend(config: TrainConfig, tokenizer: Any) -> TrainingBackend:
    """The local backend, with the vLLM sampler and trainer behaviour logprobs if asked."""
    backend: TrainingBackend
    checkpoints = config.run_dir / "checkpoints"
    distributed = distributed_for(config)
    if distributed is not None and config.sampler is SamplerName.VLLM:
        raise ValueError("torchrun: --sampler vllm is not supported with several ranks")
    if config.sampler is SamplerName.VLLM:
        from agentrl.backends.vllm import VllmBackend

        base = config.run_dir / "vllm" / "base"
        local = local_backend_for(
            config, tokenizer, checkpoints, config.lora_rank, save_base_to=base
        )
        model = base if config.base_model == TINY_MODEL else config.base_model
        vllm = _start_vllm(config, model, dtype=str(local.engine.dtype).removeprefix("torch."))
        backend = VllmBackend(local, vllm, adapter_dir=config.run_dir / "vllm" / "adapters")
    else:
        local = local_backend_for(
            config, tokenizer, checkpoints, config.lora_rank, distributed=distributed
        )
        backend = local
    if config.behaviour_logprobs is BehaviourLogprobs.TRAINER:
        from agentrl.backends.local.behaviour import TrainerBehaviour

        backend = TrainerBehaviour(backend, local.engine)
    return backend


def _start_vllm(
    config: CommonConfig, model: str | Path, lora_rank: int | None = None, dtype: str = ""
) -> Any:
    """A `VllmSampler` on `model` sized for the config's trajectories and LoRA rank, in the
    trainer's dtype (default: float32 on CPU, the checkpoint's on CUDA; vLLM's "auto" would
    downcast a float32 checkpoint to bfloat16 on CPU)."""
    from agentrl.backends.local.model import select_device
    from agentrl.backends.vllm import VllmOptions, VllmSampler

    rank = lora_rank if lora_rank is not None else getattr(config, "lora_rank", 8)
    if not dtype:
        dtype = "float32" if select_device(config.device).type == "cpu" else "auto"
    options = VllmOptions(
        dtype=dtype,
        max_model_len=config.max_trajectory_tokens + config.max_assistant_tokens,
        gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        max_lora_rank=rank,
        seed=config.seed,
    )
    return VllmSampler.start(model, options)


async def eval_sampler_for(config: EvalConfig, tokenizer: Any) -> Sampler:
    """A sampler of the base model, or of the checkpoint `config.model_path` names."""
    return await model_sampler_for(config, tokenizer, config.model_path, config.output.parent)


async def teacher_for(config: TrainConfig, tokenizer: Any) -> Teacher:
    """The sampler of `--teacher-model` (on-policy distillation's teacher), on the run's
    backend; its scratch files (vLLM's base) go under `<run_dir>/teacher`."""
    if config.teacher_model is None:
        raise ValueError("--teacher-model is not set")
    sampler = await model_sampler_for(
        config, tokenizer, config.teacher_model, config.run_dir / "teacher"
    )
    if not isinstance(sampler, Teacher):
        raise ValueError(
            f"--teacher-model: the {type(sampler).__name__} cannot score tokens "
            "(compute_logprobs); use --sampler builtin for the teacher"
        )
    return sampler


async def model_sampler_for(
    config: CommonConfig, tokenizer: Any, model_path: str | None, scratch: Path
) -> Sampler:
    """A sampler of the base model, or of the checkpoint `model_path` names (a checkpoint
    record, a local checkpoint folder or a service path); `scratch`: where a local sampler may
    write what it needs (the tiny model's base for vLLM), never a checkpoint."""
    sampler_path: str | None = None
    if model_path is not None:
        sampler_path, info = resolve_model_path(model_path)
        if info is not None and info.base_model != config.base_model:
            raise ValueError(
                f"checkpoint {info.name} was trained on --base-model {info.base_model}, but "
                f"this run uses {config.base_model}; pass --base-model {info.base_model}"
            )
    if config.backend is BackendName.LOCAL:
        rank, alpha = 8, None
        if sampler_path is not None:
            from agentrl.backends.local.files import check_adapter_dir

            adapter = Path(sampler_path) / "adapter_config.json"
            if not adapter.is_file():
                raise FileNotFoundError(
                    f"{adapter} not found: {model_path} must name a local backend checkpoint"
                )
            settings = check_adapter_dir(Path(sampler_path))  # CheckpointError naming a file
            rank, alpha = settings.rank, settings.alpha
        if config.sampler is SamplerName.VLLM:  # vLLM serves the base model + the adapter
            model: str | Path = config.base_model
            if config.base_model == TINY_MODEL:
                model = scratch / "vllm-base"
                local_backend_for(config, tokenizer, model, rank, alpha, save_base_to=model)
            vllm = _start_vllm(config, model, rank)
            if sampler_path is not None:
                vllm.use_lora(sampler_path)
            return vllm  # type: ignore[no-any-return]
        # Nothing is saved by an evaluation: the checkpoint folder is never created.
        backend = local_backend_for(config, tokenizer, scratch, rank, alpha)
        if sampler_path is not None:
            await backend.load_sampler_weights(sampler_path)
        return await backend.sampler()
    if config.sampler is SamplerName.VLLM:
        raise ValueError(f"--sampler vllm needs --backend local (got {config.backend.value})")
    from agentrl.backends.pytrio import RemoteSampler
    from agentrl.backends.pytrio.sdk import sdk_for

    sdk = sdk_for(config.backend.value)
    service = await asyncio.to_thread(sdk.connect, None, config.max_in_flight)
    limits = await sdk.limits(service, config.base_model)
    client = await sdk.sampling_client(service, config.base_model, sampler_path)
    return RemoteSampler(
        client, sdk=sdk, limits=limits, max_in_flight=config.max_in_flight, service=service
    )
