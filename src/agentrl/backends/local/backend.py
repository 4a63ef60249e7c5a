"""`LocalBackend`: the `TrainingBackend` over a local torch model with LoRA adapters."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from agentrl._optional import require
from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
)
from agentrl.backends.local.distributed import (
    DistributedContext,
    device_for,
    module_tensors,
    trainable_parameters,
)
from agentrl.backends.local.engine import ModelEngine
from agentrl.backends.local.files import (
    ADAPTER_WEIGHTS,
    check_adapter_dir,
    check_safetensors,
    read_json_object,
)
from agentrl.backends.local.model import (
    LoraSpec,
    apply_lora,
    load_causal_lm,
    qwen3_config,
    random_causal_lm,
    select_device,
    tiny_dtype,
)
from agentrl.backends.local.sampler import LocalSampler
from agentrl.backends.local.streaming import LocalGradientStream
from agentrl.backends.local.training import Normalisation, run_forward_backward
from agentrl.core.errors import CheckpointError
from agentrl.store.jsonl import named_os_error

__all__ = ["LocalBackend"]

STATE_DIR = "state"
SAMPLER_DIR = "sampler"
OPTIMIZER_FILE = "optimizer.pt"
META_FILE = "agentrl_state.json"
FULL_WEIGHTS_FILE = "model.safetensors"
"""The weights of a full fine-tuning checkpoint (a torch state dict)."""


class LocalBackend:
    """LoRA (or, with `full_finetune=True`, full) training and sampling on one local device;
    with a `DistributedContext`, one rank of a data-parallel torchrun job."""

    def __init__(
        self,
        model: Any,
        *,
        lora: LoraSpec | None = None,
        device: str | torch.device | None = "auto",
        checkpoint_dir: str | Path = "checkpoints",
        tokenizer: Any = None,
        seed: int = 0,
        micro_batch_tokens: int = 8192,
        normalisation: Normalisation = "tokens",
        kv_cache_gib: float | None = None,
        max_batch_rows: int = 64,
        full_finetune: bool = False,
        distributed: DistributedContext | None = None,
    ) -> None:
        """Wrap `model` (a transformers causal LM) with fresh LoRA adapters, or train all of
        its weights with `full_finetune=True` (e.g. a small model trained from scratch).

        `distributed` (`DistributedContext.from_env()` under torchrun): this process is one
        rank of a data-parallel job; the process group is started if needed, the weights are
        made rank 0's, and every rank must then make the same calls with the same datums
        (see `agentrl.backends.local.distributed`)."""
        self.distributed = distributed
        self.device = device_for(distributed, select_device(device))
        self._owns_group = distributed.start() if distributed is not None else False
        self.lora = lora or LoraSpec()
        self.tokenizer = tokenizer
        self.checkpoint_dir = Path(checkpoint_dir)
        self.micro_batch_tokens = micro_batch_tokens
        self.normalisation: Normalisation = normalisation
        model = model.to(self.device)
        self.full_finetune = full_finetune
        if full_finetune:
            peft_model = model.requires_grad_(True)
        else:
            peft_model = apply_lora(model, self.lora, seed=seed)
        if distributed is not None:  # every rank starts from rank 0's weights (as DDP does)
            distributed.broadcast_tensors(module_tensors(peft_model))
        eos = _eos_ids(tokenizer, model)
        self.engine = ModelEngine(peft_model.eval(), device=self.device, default_stop_tokens=eos)
        self._sampler = LocalSampler(
            self.engine, kv_cache_gib=kv_cache_gib, max_batch_rows=max_batch_rows, seed=seed
        )
        self._optimizer: torch.optim.AdamW | None = None
        self._save_lock = threading.Lock()
        self.steps = 0

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, device: str | torch.device | None = "auto", **kwargs: Any
    ) -> LocalBackend:
        """Load a model (and its tokenizer, when present) from a local path or the HF cache."""
        resolved = device_for(kwargs.get("distributed"), select_device(device))
        model = load_causal_lm(path, device=resolved)
        tokenizer = kwargs.pop("tokenizer", None)
        if tokenizer is None:
            transformers = require("transformers", "local")
            try:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    str(path), local_files_only=True
                )
            except OSError:
                tokenizer = None
        return cls(model, device=resolved, tokenizer=tokenizer, **kwargs)

    @classmethod
    def tiny(
        cls,
        tokenizer: Any = None,
        *,
        seed: int = 0,
        size: str = "tiny",
        device: str | torch.device | None = "cpu",
        lora: LoraSpec | None = None,
        model_overrides: Mapping[str, Any] | None = None,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> LocalBackend:
        """A random-initialised Qwen3-architecture model over the project's test tokenizer.

        `size` is "tiny" (2 layers, hidden 64), "qwen3-0.6b" or "qwen3-4b";
        `model_overrides` change config fields (e.g. `{"hidden_size": 32}`); `dtype` of the
        weights (default `tiny_dtype`: float32 when every weight is trained)."""
        if tokenizer is None:
            tokenizer_module = require("agentrl.chat.tokenizers", "local", "the test tokenizer")
            tokenizer = tokenizer_module.build_qwen_tokenizer()
        resolved = device_for(kwargs.get("distributed"), select_device(device))
        config = qwen3_config(size, vocab_size=len(tokenizer), **dict(model_overrides or {}))  # type: ignore[arg-type]
        if dtype is None:
            dtype = tiny_dtype(resolved, full_finetune=bool(kwargs.get("full_finetune")))
        model = random_causal_lm(config, seed=seed, device=resolved, dtype=dtype)
        return cls(model, device=resolved, tokenizer=tokenizer, seed=seed, lora=lora, **kwargs)

    # -- TrainingBackend -------------------------------------------------------------------

    async def sampler(self) -> LocalSampler:
        """The sampler of the live weights (its KV cache is dropped when they change)."""
        return self._sampler

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Accumulate gradients of `loss` over `datums` (micro-batched by token budget)."""
        return await asyncio.to_thread(self._forward_backward, list(datums), loss, config)

    def _forward_backward(
        self, datums: list[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        with self.engine.lock:
            return run_forward_backward(
                self.engine,
                datums,
                LossName(loss),
                config,
                micro_batch_tokens=self.micro_batch_tokens,
                normalisation=self.normalisation,
                distributed=self.distributed,
            )

    def open_stream(self, loss: LossName, config: LossConfig) -> LocalGradientStream:
        """One batch's gradient over several calls, rescaled by the whole batch's divisor at
        `finish` (every loss and normalisation; see `agentrl.backends.local.streaming`)."""
        return LocalGradientStream(self, LossName(loss), config)

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """One AdamW step on the LoRA parameters; gradients are then zeroed."""
        return await asyncio.to_thread(self._optim_step, adam)

    def _optim_step(self, adam: AdamParams) -> dict[str, float]:
        with self.engine.lock:
            optimizer = self._ensure_optimizer(adam)
            params = self.trainable_parameters()
            if adam.grad_clip_norm > 0:
                norm = torch.nn.utils.clip_grad_norm_(params, adam.grad_clip_norm)
            else:
                grads = [p.grad.norm() for p in params if p.grad is not None]
                norm = torch.linalg.vector_norm(torch.stack(grads)) if grads else torch.zeros(())
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            self.steps += 1
            self.engine.bump_version()
            return {"grad_norm": float(norm), "learning_rate": adam.learning_rate}

    def _ensure_optimizer(self, adam: AdamParams) -> torch.optim.AdamW:
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(self.trainable_parameters(), lr=adam.learning_rate)
        for group in self._optimizer.param_groups:
            group.update(
                lr=adam.learning_rate,
                betas=(adam.beta1, adam.beta2),
                eps=adam.eps,
                weight_decay=adam.weight_decay,
            )
        return self._optimizer

    def freeze_reference(self) -> None:
        """Make a frozen copy of the current weights the KL penalty's reference policy
        (`LossConfig.kl_coef > 0`). Needed in full fine-tuning, which has no adapter to
        switch off (e.g. after a warm start: the penalty then holds RL near the warm-started
        policy); with LoRA it replaces the default reference, the base model with the adapter
        disabled. Costs one more copy of the model's weights; not saved in checkpoints (a
        resumed run calls it again on the weights it resumes from)."""
        self.engine.freeze_reference()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The trained parameters (LoRA, or every weight), in a stable order."""
        return trainable_parameters(self.engine.model)

    async def save(self, name: str) -> CheckpointRef:
        """Save adapter + optimizer (`state/`) and adapter only (`sampler/`) under `name`.

        On several ranks only rank 0 writes; the others wait for it and return its reference
        (a failure on rank 0 raises on every rank)."""
        return await asyncio.to_thread(self._save, name)

    def _save(self, name: str) -> CheckpointRef:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"checkpoint name {name!r} must be a plain directory name")
        if self.distributed is None:
            return self._save_here(name)
        shared = self.distributed.from_main(lambda: self._save_here(name))
        if shared is None:
            raise CheckpointError(
                self.checkpoint_dir / name, "rank 0 could not save this checkpoint (see its log)"
            )
        return shared

    def _save_here(self, name: str) -> CheckpointRef:
        final = self.checkpoint_dir / name
        # One save at a time: a second save of a name waits for the first (never overlaps it);
        # each writes its own temporary folder, renamed into place only when complete.
        with self._save_lock:
            tmp = self.checkpoint_dir / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                self._write_checkpoint(tmp)
                _replace_dir(tmp, final)
            except BaseException as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                failure = _os_error(exc)
                if failure is None:
                    raise
                raise named_os_error(failure, final, "cannot save the checkpoint") from exc
        return CheckpointRef(
            name=name,
            state_path=str(final / STATE_DIR),
            sampler_path=str(final / SAMPLER_DIR),
        )

    def _write_checkpoint(self, tmp: Path) -> None:
        safetensors = require("safetensors.torch", "local")
        with self.engine.lock:
            for sub in (SAMPLER_DIR, STATE_DIR) if self.full_finetune else ():
                (tmp / sub).mkdir(parents=True)
                # save_model handles the tied embedding / unembedding (one stored tensor).
                safetensors.save_model(self.engine.model, str(tmp / sub / FULL_WEIGHTS_FILE))
            for sub in () if self.full_finetune else (SAMPLER_DIR, STATE_DIR):
                # The base embeddings are frozen: never copy them into the adapter files.
                self.engine.model.save_pretrained(str(tmp / sub), save_embedding_layers=False)
            if self._optimizer is not None:
                torch.save(self._optimizer.state_dict(), tmp / STATE_DIR / OPTIMIZER_FILE)
            meta: dict[str, object] = {"steps": self.steps, "full_finetune": self.full_finetune}
            if not self.full_finetune:
                meta.update(lora=self.lora.modules(), rank=self.lora.rank)
            (tmp / STATE_DIR / META_FILE).write_text(json.dumps(meta, indent=2))
        for sub in (SAMPLER_DIR, STATE_DIR):  # a short write (full disk) is caught here
            if self.full_finetune:
                check_safetensors(tmp / sub / FULL_WEIGHTS_FILE)
            else:
                check_adapter_dir(tmp / sub)

    async def load(self, ref: CheckpointRef) -> None:
        """Restore adapter weights and optimizer state saved by `save`."""
        await asyncio.to_thread(self._load, Path(ref.state_path), True)

    async def close(self) -> None:
        """Leave the process group this backend started (if any); the model lives in this
        process (`TrainingBackend.close`)."""
        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_group = False

    async def load_sampler_weights(self, path: str | Path) -> None:
        """Load adapter weights only (a `sampler_path`), e.g. to evaluate a checkpoint."""
        await asyncio.to_thread(self._load, Path(path), False)

    def _load_weights(self, path: Path) -> None:
        """Weights from a checkpoint folder (the caller holds the engine lock)."""
        safetensors = require("safetensors.torch", "local")
        if self.full_finetune:
            if not path.is_dir():
                raise CheckpointError(path, "no such checkpoint folder")
            weights = path / FULL_WEIGHTS_FILE
            check_safetensors(weights)  # CheckpointError naming a missing or cut file
            try:
                safetensors.load_model(self.engine.model, str(weights), device=str(self.device))
            except RuntimeError as exc:  # missing / unexpected keys, wrong shapes
                raise CheckpointError(weights, f"does not fit this model ({exc})") from exc
            return
        peft = require("peft", "local")
        check_adapter_dir(path)  # CheckpointError naming the damaged file
        weights = path / ADAPTER_WEIGHTS
        try:
            state = safetensors.load_file(str(weights), device=str(self.device))
        except Exception as exc:  # safetensors' own error types
            raise CheckpointError(weights, f"cannot be read ({exc})") from exc
        result = peft.set_peft_model_state_dict(self.engine.model, state)
        unexpected = list(getattr(result, "unexpected_keys", []))
        if unexpected:
            raise CheckpointError(weights, f"adapter does not fit this model ({unexpected[:3]})")

    def _load(self, path: Path, with_optimizer: bool) -> None:
        """Load on this process; on several ranks every rank loads the same files (they must
        be readable by all) and a failure on one rank raises on all of them."""
        if self.distributed is None:
            self._load_here(path, with_optimizer)
        elif not self.distributed.on_every_rank(lambda: self._load_here(path, with_optimizer)):
            raise CheckpointError(path, "another rank could not load this checkpoint (its log)")

    def _load_here(self, path: Path, with_optimizer: bool) -> None:
        with self.engine.lock:
            self._load_weights(path)
            if with_optimizer:
                meta_file = path / META_FILE
                if meta_file.is_file():
                    steps = read_json_object(meta_file).get("steps", 0)
                    if not isinstance(steps, int):
                        raise CheckpointError(meta_file, f'"steps" must be an integer: {steps!r}')
                    self.steps = steps
                opt_file = path / OPTIMIZER_FILE
                if opt_file.is_file():
                    try:
                        state_dict = torch.load(
                            opt_file, map_location=self.device, weights_only=True
                        )
                    except Exception as exc:  # a cut zip / pickle
                        raise CheckpointError(opt_file, f"cannot be read ({exc})") from exc
                    if self._optimizer is None:
                        self._optimizer = torch.optim.AdamW(self.trainable_parameters())
                    self._optimizer.load_state_dict(state_dict)
            self.engine.bump_version()


def _os_error(exc: BaseException) -> OSError | None:
    """`exc` as an OSError when it is one, or a writer's wrapped one ("(os error 28)")."""
    if isinstance(exc, OSError):
        return exc
    found = re.search(r"\(os error (\d+)\)", str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code))


def _replace_dir(tmp: Path, final: Path) -> None:
    """Move the complete folder `tmp` to `final`, replacing an older `final`."""
    if not final.exists():
        os.rename(tmp, final)
        return
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
    os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def _eos_ids(tokenizer: Any, model: Any) -> tuple[int, ...]:
    ids: list[int] = []
    for source in (getattr(tokenizer, "eos_token_id", None), model.config.eos_token_id):
        if isinstance(source, int):
            ids.append(source)
        elif isinstance(source, list):
            ids.extend(int(i) for i in source)
    return tuple(dict.fromkeys(ids))
