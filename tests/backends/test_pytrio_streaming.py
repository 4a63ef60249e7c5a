"""Streaming one batch over several calls on the remote backends: pytrio is refused (each call
carries its own normalisation totals, shown here through pytrio's real client over the fake
network edge), tinker accepted (its losses are sums: the parts add up as they are)."""

from __future__ import annotations

import types as pytypes
from typing import Any

import pytest

pytest.importorskip("pytrio")

from pytrio.protocol.actor.events.event import EventType
from pytrio.runtime.event_loop import SDKEventLoopRunner

from agentrl.advantages import GroupMean
from agentrl.backends.base import LossConfig, LossName
from agentrl.backends.pytrio import PyTrioBackend
from agentrl.backends.streaming import StreamingUnsupportedError, SummedStream, open_stream
from agentrl.streaming import check_streaming
from tests.backends.pytrio_fakes import MODEL
from tests.backends.test_pytrio_service import VOCAB, _backend, _runtime


@pytest.fixture(scope="module")
def sdk_loop() -> Any:
    runner = SDKEventLoopRunner()
    yield runner
    runner.close()


async def test_pytrio_refuses_streaming_and_says_why(sdk_loop, datum_factory) -> None:
    runtime = _runtime(sdk_loop)
    backend = await _backend(runtime)
    with pytest.raises(StreamingUnsupportedError, match="--no-stream-groups") as refused:
        backend.open_stream(LossName.PPO, LossConfig())
    assert "own token totals" in str(refused.value)
    with pytest.raises(StreamingUnsupportedError):
        check_streaming(backend, GroupMean(), LossName.PPO, LossConfig())
    # Why: two calls before one step each send the totals of their own datums, which the
    # service normalises by; no later call can make them the batch's.
    datums = [datum_factory(seed=s, vocab=VOCAB) for s in range(3)]
    await backend.forward_backward(datums[:1], LossName.PPO, LossConfig())
    await backend.forward_backward(datums[1:], LossName.PPO, LossConfig())
    totals = [
        p["gradient_accumulation"]["total_active_tokens"]
        for _, p in runtime.events(EventType.TRAINER_FORWARD_BACKWARD)
    ]
    assert totals == [len(datums[0]), len(datums[1]) + len(datums[2])]


class FakeTinkerTraining:
    """The calls `TinkerSdk` makes on a tinker training client; every loss is a sum."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def forward_backward(self, data: list[Any], loss: str, config: Any) -> Any:
        self.calls.append(len(data))
        return pytypes.SimpleNamespace(metrics={"loss:sum": float(len(data))})


async def test_tinker_streams_as_plain_calls(datum_factory) -> None:
    pytest.importorskip("tinker")
    from agentrl.backends.pytrio_sdk import TinkerSdk

    client = FakeTinkerTraining()
    backend = PyTrioBackend(
        None, client, base_model=MODEL, sdk=TinkerSdk(), recovery_ttl_seconds=None
    )
    check_streaming(backend, GroupMean(), LossName.PPO, LossConfig())
    stream = open_stream(backend, LossName.PPO, LossConfig())
    assert isinstance(stream, SummedStream)
    datums = [datum_factory(seed=s, vocab=VOCAB, advantage=0.5) for s in range(3)]
    first = await stream.add(datums[:1])
    second = await stream.add(datums[1:])
    result = await stream.finish()
    assert client.calls == [1, 2]  # one service call per part, nothing rescaled
    assert result.num_tokens == sum(d.num_assistant_tokens for d in datums)
    assert result.metrics["loss:sum"] == 3.0 and result.metrics["parts"] == 2.0
    expected = (first.loss * first.num_tokens + second.loss * second.num_tokens) / result.num_tokens
    assert result.loss == pytest.approx(expected)
    assert result.loss == pytest.approx(3.0 / result.num_tokens)  # loss:sum / assistant tokens


def test_tinker_refuses_local_only_loss_options_when_streaming() -> None:
    pytest.importorskip("tinker")
    from agentrl.backends.pytrio_convert import UnsupportedLossError
    from agentrl.backends.pytrio_sdk import TinkerSdk

    backend = PyTrioBackend(None, None, base_model=MODEL, sdk=TinkerSdk())
    with pytest.raises(UnsupportedLossError, match="kl_coef"):
        backend.open_stream(LossName.PPO, LossConfig(kl_coef=0.1))
