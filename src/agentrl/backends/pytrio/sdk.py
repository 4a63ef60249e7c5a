"""The two Tinker-style SDK dialects the remote backend speaks: `pytrio` and `tinker`.

They share the request types and semantics; they differ in how calls are made (pytrio:
`*_async` methods that return a future to await; tinker >= 0.38: plain methods that return
an awaitable future, `*_async` deprecated), in credentials (`PYTRIO_API_KEY` / `trio login`
vs `TINKER_API_KEY`), in how limits are reported, and in whether the SDK loads the base
model's tokenizer (pytrio does, to validate token ids; tinker does not).

What each call maps to, read from the SDKs' own source (pytrio 0.2.9, tinker 0.38):
- the per-update sampler: `save_weights_and_get_sampling_client` (temporary weights with a TTL;
  pytrio: 6 h, visibility TEMPORARY), never a permanent `save_weights_for_sampler`;
- resume: `create_training_client_from_state_with_optimizer` (one new run, Adam state restored);
- pytrio caps sampling requests in flight at 16 (`sampling_request_max_in_flight`) unless
  `pytrio.configure(...)` raised it before the `ServiceClient` was created; tinker has no such
  setting (its own dispatch limit is 400);
- tinker's server capabilities come from `tinker.RestClient` (the ServiceClient's are
  deprecated), and its `ServiceClient.close(status)` finishes the session;
- pytrio checks LoRA rank in [4, 64] client-side; tinker leaves the rank to the server.
"""

from __future__ import annotations

import os
from enum import StrEnum
from types import ModuleType
from typing import Any

from agentrl._optional import require
from agentrl.backends.pytrio.convert import RemoteLimits

__all__ = [
    "RECOVERY_TTL_SECONDS",
    "MissingApiKeyError",
    "PyTrioSdk",
    "SdkName",
    "TinkerSdk",
    "is_broken_run",
    "sdk_for",
]

RECOVERY_TTL_SECONDS = 6 * 3600
"""Lifetime of the per-update recovery state (both SDKs accept 1 hour or more)."""


class SdkName(StrEnum):
    """Which SDK to use."""

    PYTRIO = "pytrio"
    TINKER = "tinker"


class MissingApiKeyError(RuntimeError):
    """No credential for the remote service was found."""


def is_broken_run(error: BaseException) -> bool:
    """True when a training client refuses further work after a failed request (pytrio:
    `training.run_broken` after a failed chunk of a split forward_backward)."""
    return getattr(error, "code", None) == "training.run_broken"


class PyTrioSdk:
    """Calls into the `pytrio` SDK (>= 0.2.9)."""

    name = SdkName.PYTRIO
    api_key_env = "PYTRIO_API_KEY"
    rank_range: tuple[int, int] | None = (4, 64)
    """LoRA ranks the SDK accepts (checked before any request); None: the server decides."""
    accepts_ignore_index = True
    """Whether `target_tokens` may hold -100 (pytrio: yes, not counted as active tokens)."""
    calls_add_up = False
    """Whether `forward_backward` calls before one `optim_step` add up to the gradient of one
    call over all their datums (pytrio: no, each call's batch plan carries that call's own
    `gradient_accumulation` totals, the server's normalisation)."""

    @property
    def module(self) -> ModuleType:
        """The imported SDK."""
        return require("pytrio", "pytrio", "the PyTRIO backend")

    @property
    def types(self) -> ModuleType:
        """The SDK's request/response types."""
        return require("pytrio.types", "pytrio", "the PyTRIO backend")

    def check_api_key(self, api_key: str | None) -> None:
        """Raise MissingApiKeyError unless a key is passed, in the environment, or logged in."""
        if api_key or os.environ.get(self.api_key_env, "").strip():
            return
        config = require("pytrio.config.config", "pytrio", "the PyTRIO backend")
        if getattr(config.auth_state, "api_key", ""):
            return
        raise MissingApiKeyError(
            "No PyTRIO API key found. Pass api_key=..., set the PYTRIO_API_KEY environment "
            "variable, or run `trio login` once to store one."
        )

    def loss_names(self) -> frozenset[str]:
        """The loss names the SDK accepts, read from the SDK itself (pytrio 0.2.9:
        cross_entropy, importance_sampling, ppo, cispo, dro)."""
        batch = require("pytrio.client.training_batch", "pytrio", "the PyTRIO backend")
        return frozenset(str(name) for name in batch.LOSS_INPUT_SCHEMAS)

    def check_rank(self, rank: int) -> None:
        """Raise ValueError for a LoRA rank the SDK would refuse."""
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        if self.rank_range is not None and not self.rank_range[0] <= rank <= self.rank_range[1]:
            low, high = self.rank_range
            raise ValueError(f"LoRA rank must be in [{low}, {high}] for {self.name}, got {rank}")

    def configure(self, max_in_flight: int) -> None:
        """Process-wide SDK settings that must precede the service client: raise pytrio's cap
        on sampling requests in flight (default 16) to `max_in_flight`."""
        self.module.configure(sampling_request_max_in_flight=max_in_flight)

    def connect(self, api_key: str | None, max_in_flight: int = 64) -> Any:
        """A service client (blocking: authenticates over the network)."""
        self.check_api_key(api_key)
        self.configure(max_in_flight)
        return self.module.ServiceClient(api_key=api_key)

    async def close(self, service: Any) -> None:
        """Release the service client (pytrio has no public close: its runtime ends the
        session when the client is collected or the process exits)."""

    async def create_training(self, service: Any, base_model: str, **lora: Any) -> Any:
        """A new LoRA training client."""
        return await service.create_lora_training_client_async(base_model=base_model, **lora)

    async def resume_training(self, service: Any, state_path: str) -> Any:
        """A training client restored from `save_state` (weights and optimizer)."""
        return await service.create_training_client_from_state_with_optimizer_async(state_path)

    async def sampling_client(self, service: Any, base_model: str, model_path: str | None) -> Any:
        """A sampling client for the base model or saved sampler weights."""
        return await service.create_sampling_client_async(
            base_model=base_model, model_path=model_path
        )

    async def forward_backward(
        self, client: Any, data: list[Any], loss: str, config: dict[str, float] | None
    ) -> Any:
        """Run forward_backward and wait for its output."""
        future = await client.forward_backward_async(data, loss_fn=loss, loss_fn_config=config)
        return await future

    async def optim_step(self, client: Any, adam: Any) -> dict[str, float]:
        """Run an optimizer step and return its metrics."""
        future = await client.optim_step_async(adam)
        return dict((await future).metrics)

    async def save_state(self, client: Any, name: str, ttl_seconds: int | None = None) -> str:
        """Save weights + optimizer (kept forever unless `ttl_seconds`); return the path."""
        future = await client.save_state_async(name, ttl_seconds=ttl_seconds)
        return str((await future).path)

    async def ephemeral_sampling_client(self, client: Any) -> Any:
        """A sampling client of the current weights, saved as temporary weights (TTL)."""
        return await client.save_weights_and_get_sampling_client_async()

    async def save_sampler(self, client: Any, name: str) -> str:
        """Save sampler weights; return their path."""
        return str((await (await client.save_weights_for_sampler_async(name))).path)

    async def sample(
        self, client: Any, prompt: Any, num_samples: int, params: Any, **options: Any
    ) -> Any:
        """Sample and wait for the response (`options`: the SDK's other sample arguments,
        e.g. `topk_prompt_logprobs`)."""
        return await client.sample_async(
            prompt, num_samples=num_samples, sampling_params=params, **options
        )

    async def compute_logprobs(self, client: Any, prompt: Any) -> list[float | None]:
        """Prompt-aligned logprobs of `prompt`'s tokens (the first None)."""
        result: list[float | None] = await client.compute_logprobs_async(prompt)
        return result

    async def top_prompt_tokens(self, client: Any, prompt: Any) -> list[Any]:
        """Prompt-aligned rows of the most likely token after each prefix of `prompt` (each
        a list of one `(token, logprob)`, or None): one prefill, `topk_prompt_logprobs=1`,
        one generated token dropped."""
        one_token = self.types.SamplingParams(max_tokens=1)
        response = await self.sample(
            client, prompt, 1, one_token, include_prompt_logprobs=True, topk_prompt_logprobs=1
        )
        return list(response.topk_prompt_logprobs or [])

    async def limits(self, service: Any, base_model: str) -> RemoteLimits:
        """The service's training and sampling limits for `base_model`."""
        caps = await service.get_server_capabilities_async()
        for model in caps.supported_models:
            if model.model_name == base_model:
                return RemoteLimits(
                    max_seq_len=model.training.max_seq_len or model.max_context_length,
                    max_tokens_per_request=model.training.max_tokens_per_request,
                    max_sample_len=model.sampling.max_seq_len or model.max_context_length,
                    max_batch_size=model.training.max_batch_size,
                )
        names = [m.model_name for m in caps.supported_models]
        raise ValueError(f"base model {base_model!r} is not offered by the service; try {names}")

    def use_local_tokenizer(self, client: Any, tokenizer: Any) -> None:
        """Make the SDK validate token ids against `tokenizer` instead of downloading one."""
        # pytrio caches the vocabulary size of the tokenizer it would download in
        # `TrainingClient._tokenizer_vocab_size` (a functools.cached_property).
        client.__dict__["_tokenizer_vocab_size"] = len(tokenizer)


class TinkerSdk(PyTrioSdk):
    """Calls into the `tinker` SDK (>= 0.38)."""

    name = SdkName.TINKER
    api_key_env = "TINKER_API_KEY"
    rank_range = None
    accepts_ignore_index = False
    """Tinker's losses are sums over target positions; -100 targets are not documented."""
    calls_add_up = True
    """Its losses are plain sums (no per-call divisor), so calls accumulate exactly."""

    def __init__(self) -> None:
        self._api_key: str | None = None

    def loss_names(self) -> frozenset[str]:
        """The loss names the SDK accepts (tinker 0.38's `LossFnType`: also gspo,
        stable_reinforce and custom)."""
        import typing

        return frozenset(str(name) for name in typing.get_args(self.types.LossFnType))

    @property
    def module(self) -> ModuleType:
        """The imported SDK."""
        return require("tinker", "tinker", "the Tinker backend")

    @property
    def types(self) -> ModuleType:
        """The SDK's request/response types."""
        return require("tinker.types", "tinker", "the Tinker backend")

    def check_api_key(self, api_key: str | None) -> None:
        """Raise MissingApiKeyError unless a key is passed or the SDK can resolve one."""
        if api_key or os.environ.get(self.api_key_env, "").strip():
            return
        auth = require("tinker.auth", "tinker", "the Tinker backend")
        if auth.tinker_has_credentials():
            return
        raise MissingApiKeyError(
            "No Tinker API key found. Pass api_key=... or set the TINKER_API_KEY environment "
            "variable."
        )

    def configure(self, max_in_flight: int) -> None:
        """Tinker has no client-side cap to raise (its dispatch limit is 400 requests)."""

    def connect(self, api_key: str | None, max_in_flight: int = 64) -> Any:
        """A service client; the key is kept for the REST client that reads capabilities."""
        self.check_api_key(api_key)
        self._api_key = api_key
        return self.module.ServiceClient(api_key=api_key)

    async def close(self, service: Any) -> None:
        """Finish the session (`ServiceClient.close("success")`)."""
        await service.close("success")

    async def create_training(self, service: Any, base_model: str, **lora: Any) -> Any:
        """A new LoRA training client."""
        return await service.create_lora_training_client(base_model=base_model, **lora)

    async def resume_training(self, service: Any, state_path: str) -> Any:
        """A training client restored from `save_state` (weights and optimizer)."""
        return await service.create_training_client_from_state_with_optimizer(state_path)

    async def sampling_client(self, service: Any, base_model: str, model_path: str | None) -> Any:
        """A sampling client for the base model or saved sampler weights."""
        if model_path is not None:
            return await service.create_sampling_client(model_path=model_path)
        return await service.create_sampling_client(base_model=base_model)

    async def forward_backward(
        self, client: Any, data: list[Any], loss: str, config: dict[str, float] | None
    ) -> Any:
        """Run forward_backward and wait for its output."""
        return await client.forward_backward(data, loss, config)

    async def optim_step(self, client: Any, adam: Any) -> dict[str, float]:
        """Run an optimizer step and return its metrics."""
        response = await client.optim_step(adam)
        return dict(getattr(response, "metrics", None) or {})

    async def save_state(self, client: Any, name: str, ttl_seconds: int | None = None) -> str:
        """Save weights + optimizer (kept forever unless `ttl_seconds`); return the path."""
        return str((await client.save_state(name, ttl_seconds=ttl_seconds)).path)

    async def ephemeral_sampling_client(self, client: Any) -> Any:
        """A sampling client of a snapshot of the current weights (no permanent save)."""
        return await client.save_weights_and_get_sampling_client()

    async def save_sampler(self, client: Any, name: str) -> str:
        """Save sampler weights; return their path."""
        return str((await client.save_weights_for_sampler(name)).path)

    async def sample(
        self, client: Any, prompt: Any, num_samples: int, params: Any, **options: Any
    ) -> Any:
        """Sample and wait for the response (Tinker's `sample` returns an awaitable future)."""
        return await client.sample(
            prompt, num_samples=num_samples, sampling_params=params, **options
        )

    async def compute_logprobs(self, client: Any, prompt: Any) -> list[float | None]:
        """Tinker's `compute_logprobs` returns an awaitable future (its `_async` twin is
        deprecated)."""
        result: list[float | None] = await client.compute_logprobs(prompt)
        return result

    async def limits(self, service: Any, base_model: str) -> RemoteLimits:
        """Tinker reports only the context length per model (read through its RestClient)."""
        caps = await self.module.RestClient(api_key=self._api_key).get_server_capabilities()
        for model in caps.supported_models:
            if model.model_name == base_model:
                length = model.max_context_length
                return RemoteLimits(max_seq_len=length, max_sample_len=length)
        return RemoteLimits()

    def use_local_tokenizer(self, client: Any, tokenizer: Any) -> None:
        """Tinker does not load a tokenizer for training; nothing to do."""


def sdk_for(name: SdkName | str) -> PyTrioSdk:
    """The dialect object for `name`."""
    resolved = SdkName(name)
    return TinkerSdk() if resolved is SdkName.TINKER else PyTrioSdk()
