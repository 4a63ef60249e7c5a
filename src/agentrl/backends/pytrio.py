"""PyTRIO backend: remote LoRA training and sampling over the `pytrio` SDK (or `tinker`).

    backend = await PyTrioBackend.create("Qwen/Qwen3.5-4B", rank=32, seed=42)
    sampler = await backend.sampler()                  # RemoteSampler
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    await backend.optim_step(AdamParams(learning_rate=1e-6))
    ref = await backend.save("update-0020")            # state + sampler weights
    backend = await PyTrioBackend.resume(ref.state_path, base_model="Qwen/Qwen3.5-4B")

The API key comes from the `api_key` argument, `PYTRIO_API_KEY`, or `trio login`. The SDK
validates token ids against the base model's tokenizer, which it downloads on first use;
pass `tokenizer=` (an object or a local path) to use a local one instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl._optional import require
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    SamplingParams,
)
from agentrl.backends.pytrio_convert import (
    RemoteLimits,
    check_datums_fit,
    completion_from_sequence,
    loss_fn_config,
    to_sdk_adam,
    to_sdk_datum,
    to_sdk_sampling_params,
)
from agentrl.backends.pytrio_sdk import MissingApiKeyError, PyTrioSdk, SdkName, sdk_for
from agentrl.datums import Datum
from agentrl.types import Completion

__all__ = ["MissingApiKeyError", "PyTrioBackend", "RemoteSampler", "SdkName"]


class RemoteSampler:
    """`Sampler` over an SDK sampling client, with a bound on requests in flight."""

    def __init__(
        self,
        client: Any,
        *,
        sdk: PyTrioSdk | None = None,
        max_in_flight: int = 64,
        limits: RemoteLimits | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.client = client
        self.sdk = sdk or PyTrioSdk()
        self.limits = limits or RemoteLimits()
        self.max_in_flight = max_in_flight
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.prompt_tokens = 0
        """Prompt tokens sent (each request counts its prompt once)."""

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.max_in_flight), loop
        return self._semaphore

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` completions with per-token logprobs."""
        prompt = [int(t) for t in prompt_tokens]
        if not prompt:
            raise ValueError("prompt_tokens is empty")
        limit = self.limits.max_sample_len
        if limit is not None and len(prompt) + params.max_tokens > limit:
            raise ValueError(
                f"prompt of {len(prompt)} tokens + max_tokens {params.max_tokens} exceeds the "
                f"service's sampling limit of {limit} tokens"
            )
        types = self.sdk.types
        model_input = types.ModelInput.from_ints(prompt)
        sdk_params = to_sdk_sampling_params(types, params)
        async with self._gate():
            response = await self.sdk.sample(self.client, model_input, num_samples, sdk_params)
        self.prompt_tokens += len(prompt)
        completions = [completion_from_sequence(seq) for seq in response.sequences]
        if len(completions) != num_samples:
            raise ValueError(f"asked the service for {num_samples} samples, got {len(completions)}")
        return completions


class PyTrioBackend:
    """`TrainingBackend` over a remote LoRA training client (pytrio or tinker SDK)."""

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
    ) -> None:
        """Wrap clients created elsewhere (see `create` / `resume` for the usual way)."""
        self.service = service
        self.training_client = training_client
        self.base_model = base_model
        self.sdk = sdk or PyTrioSdk()
        self.limits = limits or RemoteLimits()
        self.max_in_flight = max_in_flight
        self.steps = 0
        """Optimizer steps taken through this object."""
        self._pristine = pristine
        """True while the weights are the base model's (a fresh run before any step)."""
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
    ) -> PyTrioBackend:
        """Connect and start a new LoRA training run on `base_model` (rank in [4, 64])."""
        if not 4 <= rank <= 64:
            raise ValueError(f"LoRA rank must be in [4, 64] for the remote service, got {rank}")
        dialect = sdk_for(sdk)
        service = await asyncio.to_thread(dialect.connect, api_key)
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
    ) -> PyTrioBackend:
        """A new training client restored (weights + optimizer) from a `save` state path."""
        dialect = sdk_for(sdk)
        service = await asyncio.to_thread(dialect.connect, api_key)
        limits = await dialect.limits(service, base_model)
        client = await dialect.resume_training(service, state_path)
        return cls(
            service,
            client,
            base_model=base_model,
            sdk=dialect,
            limits=limits,
            tokenizer=tokenizer,
            max_in_flight=max_in_flight,
            pristine=False,
        )

    async def sampler_for(self, model_path: str | None = None) -> RemoteSampler:
        """A sampler of the base model (`model_path=None`) or of saved sampler weights."""
        client = await self.sdk.sampling_client(self.service, self.base_model, model_path)
        return RemoteSampler(
            client, sdk=self.sdk, max_in_flight=self.max_in_flight, limits=self.limits
        )

    async def sampler(self) -> RemoteSampler:
        """A sampler of the current weights (saved as temporary sampler weights if trained)."""
        if self._sampler is not None and self._sampler_version == self._version:
            return self._sampler
        path = None
        if not self._pristine:
            name = f"sampler-v{self._version:06d}"
            path = await self.sdk.save_sampler(self.training_client, name)
        self._sampler = await self.sampler_for(path)
        self._sampler_version = self._version
        return self._sampler

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """Send datums (masked by zero advantage) and accumulate gradients remotely."""
        loss = LossName(loss)
        if not datums:
            raise ValueError("forward_backward got no datums")
        check_datums_fit(datums, self.limits, self.base_model)
        types = self.sdk.types
        data = [to_sdk_datum(types, d, loss) for d in datums]
        output = await self.sdk.forward_backward(
            self.training_client, data, loss.value, loss_fn_config(loss, config)
        )
        metrics = {k: float(v) for k, v in dict(getattr(output, "metrics", {}) or {}).items()}
        tokens = int(sum(d.mask.sum() for d in datums))
        if "loss_mean" in metrics:  # pytrio: loss_sum / token_count of the logical batch
            loss_value = metrics["loss_mean"]
        else:  # tinker reports the summed loss as "loss:sum"
            total = metrics.get("loss:sum", metrics.get("loss_sum", 0.0))
            loss_value = total / max(tokens, 1)
        return ForwardBackwardResult(loss=loss_value, num_tokens=tokens, metrics=metrics)

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """One remote Adam step."""
        metrics = await self.sdk.optim_step(self.training_client, to_sdk_adam(self.sdk.types, adam))
        self.steps += 1
        self._version += 1
        self._pristine = False
        return metrics

    async def save(self, name: str) -> CheckpointRef:
        """`save_state` and `save_weights_for_sampler` together; both paths are returned."""
        state = await self.sdk.save_state(self.training_client, name)
        sampler = await self.sdk.save_sampler(self.training_client, name)
        return CheckpointRef(name=name, state_path=state, sampler_path=sampler)

    async def load(self, ref: CheckpointRef) -> None:
        """Replace the training client by one restored from `ref` (weights + optimizer)."""
        self.training_client = await self.sdk.resume_training(self.service, ref.state_path)
        if self.tokenizer is not None:
            self.sdk.use_local_tokenizer(self.training_client, self.tokenizer)
        self._version += 1
        self._pristine = False


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
