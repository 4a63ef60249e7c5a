"""The SDK dialects: credentials, limits, and tinker's types accepting our datums."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pytrio")

from agentrl.backends.base import LossName
from agentrl.backends.pytrio import MissingApiKeyError, PyTrioBackend
from agentrl.backends.pytrio_convert import RemoteLimits, to_sdk_datum

VOCAB = 1000


# -- credentials -----------------------------------------------------------------------------


async def test_missing_pytrio_api_key_is_a_clear_error(monkeypatch) -> None:
    from pytrio.config import config as pytrio_config

    monkeypatch.delenv("PYTRIO_API_KEY", raising=False)
    monkeypatch.setattr(pytrio_config.auth_state, "api_key", "")
    with pytest.raises(MissingApiKeyError, match=r"PYTRIO_API_KEY.*trio login"):
        await PyTrioBackend.create("Qwen/Qwen3-0.6B")


async def test_missing_tinker_api_key_is_a_clear_error(monkeypatch, tmp_path) -> None:
    pytest.importorskip("tinker")
    monkeypatch.delenv("TINKER_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(MissingApiKeyError, match="TINKER_API_KEY"):
        await PyTrioBackend.create("Qwen/Qwen3-0.6B", sdk="tinker")


def test_rank_outside_service_range_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[4, 64\]"):
        asyncio.run(PyTrioBackend.create("Qwen/Qwen3-0.6B", rank=2))


# -- tinker: same adapter, its own types -----------------------------------------------------


def test_tinker_types_accept_our_datums(datum_factory) -> None:
    tinker = pytest.importorskip("tinker")
    datum = datum_factory(seed=5, vocab=VOCAB)
    sdk_datum = to_sdk_datum(tinker.types, datum, LossName.PPO)
    assert sdk_datum.model_input.to_ints() == datum.model_input.tolist()
    assert set(sdk_datum.loss_fn_inputs) == {"target_tokens", "logprobs", "advantages"}
    np.testing.assert_array_equal(
        sdk_datum.loss_fn_inputs["advantages"].to_numpy(), datum.advantages
    )


async def test_limits_come_from_the_service_capabilities() -> None:
    from pytrio.types import (
        GetServerCapabilitiesResponse,
        ModelOperationCapabilities,
        SupportedModel,
    )

    from agentrl.backends.pytrio_sdk import PyTrioSdk

    def caps(seq: int, per_request: int, batch: int) -> ModelOperationCapabilities:
        return ModelOperationCapabilities(
            available=True,
            max_batch_size=batch,
            max_tokens_per_request=per_request,
            max_seq_len=seq,
        )

    class Service:
        async def get_server_capabilities_async(self) -> GetServerCapabilitiesResponse:
            model = SupportedModel(
                model_name="Qwen/Qwen3.5-4B",
                max_context_length=32768,
                training=caps(16384, 65536, 32),
                sampling=caps(32768, 1 << 20, 64),
            )
            return GetServerCapabilitiesResponse(supported_models=[model])

    limits = await PyTrioSdk().limits(Service(), "Qwen/Qwen3.5-4B")
    assert limits == RemoteLimits(16384, 65536, 32768, 32)
    assert limits.max_datum_tokens == 16384
    with pytest.raises(ValueError, match="not offered by the service"):
        await PyTrioSdk().limits(Service(), "Qwen/Unknown")


# -- tinker: no deprecated calls, the session closed, the rank left to the server -------------

TINKER_CALLS = {
    "ServiceClient": (
        "create_lora_training_client",
        "create_training_client_from_state_with_optimizer",
        "create_sampling_client",
        "close",
    ),
    "TrainingClient": (
        "forward_backward",
        "optim_step",
        "save_state",
        "save_weights_for_sampler",
        "save_weights_and_get_sampling_client",
    ),
    "SamplingClient": ("sample", "compute_logprobs"),
    "RestClient": ("get_server_capabilities",),
}
"""Every tinker method TinkerSdk calls (see agentrl/backends/pytrio_sdk.py)."""


def test_tinker_calls_are_not_deprecated() -> None:
    tinker = pytest.importorskip("tinker")
    import inspect

    from agentrl.backends import pytrio_sdk

    source = inspect.getsource(pytrio_sdk.TinkerSdk)
    for cls_name, methods in TINKER_CALLS.items():
        cls = getattr(tinker, cls_name)
        for name in methods:
            method = getattr(cls, name)
            assert not hasattr(method, "__deprecated__"), f"tinker.{cls_name}.{name} is deprecated"
            assert f".{name}(" in source, f"TinkerSdk no longer calls {name}; update TINKER_CALLS"
    # The deprecated spellings the pytrio dialect uses must not leak into tinker's.
    for deprecated in ("_async(", "get_server_capabilities_async", "create_rest_client"):
        assert deprecated not in source


async def test_tinker_session_is_closed() -> None:
    tinker = pytest.importorskip("tinker")
    from agentrl.backends.pytrio_sdk import TinkerSdk

    service = tinker.ServiceClient(api_key="tml-offline")  # no request until first use
    await TinkerSdk().close(service)
    assert service._closed is True


def test_rank_limits_per_sdk() -> None:
    from agentrl.backends.pytrio_sdk import PyTrioSdk, TinkerSdk

    for rank in (4, 32, 64):
        PyTrioSdk().check_rank(rank)
    for rank in (2, 65, 128):
        with pytest.raises(ValueError, match=r"\[4, 64\] for pytrio"):
            PyTrioSdk().check_rank(rank)
    TinkerSdk().check_rank(128)  # the service decides
    with pytest.raises(ValueError, match=">= 1"):
        TinkerSdk().check_rank(0)


async def test_tinker_top_prompt_tokens_uses_samples_real_signature() -> None:
    """TinkerSdk.top_prompt_tokens: its `sample` call binds to tinker's real
    `SamplingClient.sample` signature, and it reads tinker's own `SampleResponse`."""
    tinker = pytest.importorskip("tinker")
    import inspect

    from agentrl.backends.pytrio_sdk import TinkerSdk

    signature = inspect.signature(tinker.SamplingClient.sample)
    calls: list[inspect.BoundArguments] = []

    class EdgeClient:  # the network edge: tinker's response type, built as the service would
        async def sample(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(signature.bind(self, *args, **kwargs))
            rows = [None, [(8, -0.1)], [(100, -0.2)]]
            return tinker.types.SampleResponse(sequences=[], _topk_prompt_logprobs_list=rows)

    sdk = TinkerSdk()
    prompt = tinker.types.ModelInput.from_ints([4, 50, 7])
    rows = await sdk.top_prompt_tokens(EdgeClient(), prompt)
    assert rows == [None, [(8, -0.1)], [(100, -0.2)]]
    (bound,) = calls
    assert bound.arguments["topk_prompt_logprobs"] == 1
    assert bound.arguments["include_prompt_logprobs"] is True
    assert bound.arguments["sampling_params"].max_tokens == 1
