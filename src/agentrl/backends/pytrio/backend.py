"""PyTRIO backend: remote LoRA training and sampling over the `pytrio` SDK (or `tinker`).

    backend = await PyTrioBackend.create("Qwen/Qwen3.5-4B", rank=32, seed=42)
    sampler = await backend.sampler()                  # RemoteSampler
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=1e-6))
    ref = await backend.save("update-0020")            # state + sampler weights
    backend = await PyTrioBackend.resume(ref.state_path, base_model="Qwen/Qwen3.5-4B")

The API key comes from the `api_key` argument, `PYTRIO_API_KEY`, or `trio login`. pytrio
validates training token ids against the base model's vocabulary size, loading the tokenizer
on the first forward_backward: from ModelScope when `modelscope` is installed, else from the
Hugging Face hub through transformers. Pass `tokenizer=` (an object or a local folder, the
CLI's `--tokenizer-path`) to use a local one and download nothing. Tinker loads no tokenizer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentrl._optional import require
from agentrl.algo.datums import Datum
from agentrl.algo.mismatch import LogprobMismatch, datum_mismatch
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
)
from agentrl.backends.pytrio.convert import (
    MaskMode,
    RemoteLimits,
    check_datums_fit,
    check_remote_loss,
    loss_fn_config,
    to_sdk_adam,
    to_sdk_datum,
)
from agentrl.backends.pytrio.sampler import RemoteSampler, check_in_flight
from agentrl.backends.pytrio.sdk import (
    RECOVERY_TTL_SECONDS,
    MissingApiKeyError,
    PyTrioSdk,
    SdkName,
    is_broken_run,
    sdk_for,
)
from agentrl.backends.streaming import StreamingUnsupportedError, SummedStream
from agentrl.core.errors import CheckpointError

__all__ = ["MaskMode", "MissingApiKeyError", "PyTrioBackend", "RemoteSampler", "SdkName"]

log = logging.getLogger(__name__)


class PyTrioBackend:
    """`TrainingBackend` over a remote LoRA training client (pytrio or tinker SDK).

    Storage: each update's sampler is temporary weights (`save_weights_and_get_sampling_client`,
    kept by the service for hours, not forever); `save()` alone writes permanent checkpoints.
    With `recovery_ttl_seconds`, each optimizer step also saves a temporary training state, so a
    training client that breaks (a failed chunk of a split forward_backward) is rebuilt from the
    state before the current update and the update is retried once: at most that update's work
    is lost. Set it to None to save nothing between checkpoints (recovery then starts from the
    last permanent checkpoint).
    """

    def __init__(
        self,
        service: Any,
        training_client: Any,
        *,
        base_model: str,
        sdk: PyTrioSdk | None = None,
        limits: RemoteLimits | None = None,
        tokenizer: Any = None,
        max_in_flight: int = 64,
        pristine: bool = True,
        mask_mode: MaskMode | str = MaskMode.ZERO_ADVANTAGE,
        recovery_ttl_seconds: int | None = RECOVERY_TTL_SECONDS,
        state_path: str | None = None,
    ) -> None:
        """Wrap clients created elsewhere (see `create` / `resume` for the usual way)."""
        self.service = service
        self.training_client = training_client
        self.base_model = base_model
        self.sdk = sdk or PyTrioSdk()
        self.limits = limits or RemoteLimits()
        self.max_in_flight = max_in_flight
        self.mask_mode = MaskMode(mask_mode)
        if self.mask_mode is MaskMode.IGNORE_INDEX and not self.sdk.accepts_ignore_index:
            raise ValueError(
                f"mask_mode='ignore_index' sends -100 targets, which {self.sdk.name} does not "
                "accept; its losses are sums over targets, so mask_mode='zero_advantage' gives "
                "the same gradient there"
            )
        if recovery_ttl_seconds is not None and recovery_ttl_seconds < 3600:
            raise ValueError(
                f"recovery_ttl_seconds must be >= 3600 (the services' minimum) or None, "
                f"got {recovery_ttl_seconds}"
            )
        self.recovery_ttl_seconds = recovery_ttl_seconds
        self.steps = 0
        """Optimizer steps taken through this object."""
        self.recoveries = 0
        """Training clients rebuilt after the service refused further work."""
        self._pristine = pristine
        """True while the weights are the base model's (a fresh run before any step)."""
        self._state_path = state_path
        """The saved training state the current training client started from, if any."""
        self._recovery_path = state_path
        """The newest training state to rebuild from (a recovery state or a checkpoint)."""
        self._version = 0
        self._sampler: RemoteSampler | None = None
        self._sampler_version = -1
        self.tokenizer = None if tokenizer is None else _load_tokenizer(tokenizer)
        if self.tokenizer is not None:
            self.sdk.use_local_tokenizer(training_client, self.tokenizer)

    @classmethod
    async def create(
        cls,
        base_model: str,
        *,
        rank: int = 32,
        seed: int | None = 42,
        train_mlp: bool = True,
        train_attn: bool = True,
        train_unembed: bool = True,
        api_key: str | None = None,
        tokenizer: Any = None,
        sdk: SdkName | str = SdkName.PYTRIO,
        max_in_flight: int = 64,
        mask_mode: MaskMode | str = MaskMode.ZERO_ADVANTAGE,
        recovery_ttl_seconds: int | None = RECOVERY_TTL_SECONDS,
        service: Any = None,
    ) -> PyTrioBackend:
        """Connect and start a new LoRA training run on `base_model` (pytrio: rank in [4, 64])."""
        dialect = sdk_for(sdk)
        dialect.check_rank(rank)
        check_in_flight(max_in_flight)
        if service is None:  # else: an existing service client (e.g. shared in a notebook)
            service = await asyncio.to_thread(dialect.connect, api_key, max_in_flight)
        limits = await dialect.limits(service, base_model)
        client = await dialect.create_training(
            service,
            base_model,
            rank=rank,
            seed=seed,
            train_mlp=train_mlp,
            train_attn=train_attn,
            train_unembed=train_unembed,
        )
        return cls(
            service,
            client,
            base_model=base_model,
            sdk=dialect,
            limits=limits,
            tokenizer=tokenizer,
            max_in_flight=max_in_flight,
            mask_mode=mask_mode,
            recovery_ttl_seconds=recovery_ttl_seconds,
        )

    @classmethod
    async def resume(
        cls,
        state_path: str,
        *,
        base_model: str,
        api_key: str | None = None,
        tokenizer: Any = None,
        sdk: SdkName | str = SdkName.PYTRIO,
        max_in_flight: int = 64,
        mask_mode: MaskMode | str = MaskMode.ZERO_ADVANTAGE,
        recovery_ttl_seconds: int | None = RECOVERY_TTL_SECONDS,
        service: Any = None,
    ) -> PyTrioBackend:
        """ONE new training run restored (weights + optimizer) from a `save` state path; a
        later `load()` of the same checkpoint does not start another run."""
        dialect = sdk_for(sdk)
        check_in_flight(max_in_flight)
        if service is None:  # else: an existing service client (e.g. shared in a notebook)
            service = await asyncio.to_thread(dialect.connect, api_key, max_in_flight)
        limits = await dialect.limits(service, base_model)
        client = await _restore(dialect, service, state_path)
        return cls(
            service,
            client,
            base_model=base_model,
            sdk=dialect,
            limits=limits,
            tokenizer=tokenizer,
            max_in_flight=max_in_flight,
            pristine=False,
            mask_mode=mask_mode,
            recovery_ttl_seconds=recovery_ttl_seconds,
            state_path=state_path,
        )

    async def sampler_for(self, model_path: str | None = None) -> RemoteSampler:
        """A sampler of the base model (`model_path=None`) or of saved sampler weights."""
        client = await self.sdk.sampling_client(self.service, self.base_model, model_path)
        return self._wrap(client)

    def _wrap(self, client: Any) -> RemoteSampler:
        return RemoteSampler(
            client, sdk=self.sdk, max_in_flight=self.max_in_flight, limits=self.limits
        )

    async def sampler(self) -> RemoteSampler:
        """A sampler of the current weights: the base model's before any step, else a
        temporary snapshot (never a permanent save)."""
        if self._sampler is not None and self._sampler_version == self._version:
            return self._sampler
        if self._pristine:
            self._sampler = await self.sampler_for(None)
        else:
            client = await self.sdk.ephemeral_sampling_client(self.training_client)
            self._sampler = self._wrap(client)
        self._sampler_version = self._version
        return self._sampler

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Send datums (masked as `mask_mode` says) and accumulate gradients remotely.

        A failed request is sent once more; if the service then refuses further work on this
        training client (a failed chunk of a split batch left its gradients uncertain), the
        client is rebuilt from the newest saved state and the batch is sent to it. The result's
        metrics then carry `retried = 1` and `recovered = 1` (0 when the retry went through).
        """
        loss = LossName(loss)
        if not datums:
            raise ValueError("forward_backward got no datums")
        check_remote_loss(loss, config, self.sdk.loss_names(), self.sdk.name.value)
        check_datums_fit(datums, self.limits, self.base_model)
        types = self.sdk.types
        data = [to_sdk_datum(types, d, loss, self.mask_mode) for d in datums]
        settings = loss_fn_config(loss, config)

        async def send() -> Any:  # to the current training client (a recovery replaces it)
            return await self.sdk.forward_backward(self.training_client, data, loss.value, settings)

        retried = recovered = 0.0
        try:
            output = await send()
        except Exception as failure:
            log.warning("remote forward_backward failed (%s); trying once more", failure)
            retried = 1.0
            try:  # a client whose gradients became uncertain refuses this (run broken)
                output = await send()
            except Exception as exc:
                if not is_broken_run(exc):
                    raise
                await self._recover(failure)
                recovered = 1.0
                output = await send()
        metrics = {k: float(v) for k, v in dict(getattr(output, "metrics", {}) or {}).items()}
        if retried:
            metrics.update(retried=retried, recovered=recovered)
        tokens = int(sum(d.mask.sum() for d in datums))
        if "loss_mean" in metrics:  # pytrio: loss_sum / token_count of the logical batch
            loss_value = metrics["loss_mean"]
        else:  # tinker reports the summed loss as "loss:sum"
            total = metrics.get("loss:sum", metrics.get("loss_sum", 0.0))
            loss_value = total / max(tokens, 1)
        return ForwardBackwardResult(
            loss=loss_value,
            num_tokens=tokens,
            metrics=metrics,
            mismatch=_mismatch(datums, output),
        )

    def open_stream(self, loss: LossName, config: LossConfig) -> SummedStream:
        """Stream one batch over several calls where they add up exactly (tinker: its losses
        are sums); pytrio normalises every call by that call's own totals: refused."""
        loss = LossName(loss)
        check_remote_loss(loss, config, self.sdk.loss_names(), self.sdk.name.value)
        if not self.sdk.calls_add_up:
            raise StreamingUnsupportedError(
                f"stream_groups (--stream-groups) needs forward_backward calls that add up to "
                f"one batch's gradient, but {self.sdk.name.value} divides each call's summed "
                "loss by that call's own token totals (its batch plan's gradient_accumulation), "
                "so a group streamed alone would weigh 1 / its tokens instead of 1 / the "
                "batch's; use --no-stream-groups with this backend (or --backend tinker / "
                "local, where streaming is exact)"
            )
        return SummedStream(self, loss, config)

    async def _recover(self, error: BaseException) -> None:
        """Replace a broken training client by one restored from the newest saved state."""
        if self._recovery_path is None:
            raise RuntimeError(
                "the remote training client refused further work and there is no saved state "
                "to rebuild it from (no checkpoint yet and recovery_ttl_seconds=None)"
            ) from error
        log.warning(
            "remote training client is broken (%s); rebuilding it from %s",
            error,
            self._recovery_path,
        )
        self.training_client = await self.sdk.resume_training(self.service, self._recovery_path)
        if self.tokenizer is not None:
            self.sdk.use_local_tokenizer(self.training_client, self.tokenizer)
        self._state_path = self._recovery_path
        self.recoveries += 1

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """One remote Adam step (then a temporary recovery state, if enabled)."""
        metrics = await self.sdk.optim_step(self.training_client, to_sdk_adam(self.sdk.types, adam))
        self.steps += 1
        self._version += 1
        self._pristine = False
        if self.recovery_ttl_seconds is not None:
            self._recovery_path = await self.sdk.save_state(
                self.training_client,
                f"recovery-{uuid.uuid4().hex[:12]}",
                ttl_seconds=self.recovery_ttl_seconds,
            )
        return metrics

    async def save(self, name: str) -> CheckpointRef:
        """Permanent `save_state` and `save_weights_for_sampler` together; both paths returned."""
        state = await self.sdk.save_state(self.training_client, name)
        sampler = await self.sdk.save_sampler(self.training_client, name)
        self._recovery_path = state
        return CheckpointRef(name=name, state_path=state, sampler_path=sampler)

    async def load(self, ref: CheckpointRef) -> None:
        """Restore training state (weights + optimizer) from `ref`: a new training run, unless
        this backend's run already started from that state (see `resume`)."""
        if ref.state_path != self._state_path:
            self.training_client = await _restore(self.sdk, self.service, ref.state_path)
            if self.tokenizer is not None:
                self.sdk.use_local_tokenizer(self.training_client, self.tokenizer)
            self._state_path = ref.state_path
        self._recovery_path = ref.state_path
        self._version += 1
        self._pristine = False

    async def close(self) -> None:
        """Finish the service session (tinker) and release the clients."""
        await self.sdk.close(self.service)


async def _restore(sdk: PyTrioSdk, service: Any, state_path: str) -> Any:
    """A training client from a saved state; a state the service refuses is a CheckpointError
    naming it (the SDK's own error is chained)."""
    try:
        return await sdk.resume_training(service, state_path)
    except Exception as exc:
        raise CheckpointError(
            state_path, f"the {sdk.name} service could not restore this training state: {exc}"
        ) from exc


def _mismatch(datums: Sequence[Datum], output: Any) -> LogprobMismatch | None:
    """Sampler-vs-trainer agreement from `loss_fn_outputs[i]["logprobs"]` (None if absent)."""
    outputs = getattr(output, "loss_fn_outputs", None)
    if not outputs or len(outputs) != len(datums):
        return None
    values = []
    for item in outputs:
        logprobs = item.get("logprobs") if isinstance(item, Mapping) else None
        if logprobs is None:
            return None
        values.append(np.asarray(logprobs.to_numpy(), dtype=np.float64))
    return datum_mismatch(datums, values)


def _load_tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, str | Path):
        transformers = require("transformers", "local", "loading a local tokenizer")
        path = Path(tokenizer)
        if not path.exists():
            raise FileNotFoundError(f"tokenizer path {path} does not exist")
        return transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not hasattr(tokenizer, "__len__"):
        raise TypeError("tokenizer must be a path or a tokenizer object with __len__")
    return tokenizer
