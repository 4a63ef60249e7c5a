"""PyTRIO backend without the service: the SDK's own batch planning, its real clients with
fakes only at the transport seam (the actor coordinators), and the missing-key path."""

from __future__ import annotations

import asyncio
import os
import types as pytypes
from typing import Any

import numpy as np
import pytest

pytrio = pytest.importorskip("pytrio")

from pytrio.client.builders.training import build_trainer_forward_payload  # noqa: E402
from pytrio.client.sampling import SamplingClient  # noqa: E402
from pytrio.client.training import TrainingClient, _ReadyTrainingActorBinding  # noqa: E402
from pytrio.client.training_batch import plan_training_batch  # noqa: E402
from pytrio.model.limits import SamplingLimits, TrainingLimits  # noqa: E402
from pytrio.protocol.actor.events.event import EventType  # noqa: E402
from pytrio.protocol.actor.events.tensor import WireTensorData  # noqa: E402
from pytrio.protocol.actor.events.trainer.lora import FreshLoraSource, LoraRunSpec  # noqa: E402
from pytrio.protocol.actor.sampling_run.sample import (  # noqa: E402
    ActorSampleResponse,
    ActorSampleSequence,
    SampleRequest,
)
from pytrio.runtime.event_loop import SDKEventLoopRunner  # noqa: E402
from pytrio.runtime.service import ActorHeartbeatHandle  # noqa: E402
from pytrio.types.future.api_future import APIFuture  # noqa: E402

from agentrl.backends.base import AdamParams, LossConfig, LossName, SamplingParams  # noqa: E402
from agentrl.backends.pytrio import PyTrioBackend, RemoteSampler  # noqa: E402
from agentrl.backends.pytrio_convert import (  # noqa: E402
    DatumTooLongError,
    RemoteLimits,
    to_sdk_datum,
)
from agentrl.types import CompletionStop  # noqa: E402

VOCAB = 1000


@pytest.fixture(scope="module")
def sdk_loop() -> Any:
    runner = SDKEventLoopRunner()
    yield runner
    runner.close()


def _runtime(runner: SDKEventLoopRunner) -> Any:
    return pytypes.SimpleNamespace(event_loop=runner, telemetry=None)


# -- offline batch planning ------------------------------------------------------------------


@pytest.mark.parametrize("loss", [LossName.PPO, LossName.IMPORTANCE_SAMPLING])
def test_datums_pass_pytrio_planning_and_mask_by_zero_advantage(datum_factory, loss) -> None:
    datums = [datum_factory(seed=s, vocab=VOCAB, advantage=0.25 * (s + 1)) for s in range(3)]
    data = [to_sdk_datum(pytrio.types, d, loss) for d in datums]
    # The SDK ignores any key its loss does not list: a mask sent along would be dropped.
    data[0].loss_fn_inputs["mask"] = pytrio.types.TensorData.from_numpy(datums[0].mask)
    limits = TrainingLimits(max_batch_size=2, max_tokens_per_request=None, max_seq_len=None)
    plan = plan_training_batch(
        data, loss_fn=loss.value, auto_shift=False, limits=limits, tokenizer_vocab_size=VOCAB
    )
    assert [len(c.samples) for c in plan.chunks] == [2, 1]
    assert plan.totals.total_samples == 3
    assert plan.totals.total_active_tokens == sum(len(d) for d in datums)
    assert plan.totals.total_advantage_tokens == sum(d.num_assistant_tokens for d in datums)
    sent = []
    for chunk in plan.chunks:
        payload = build_trainer_forward_payload(
            chunk, {"clip_low_threshold": 0.8}, False, plan.totals
        )
        assert payload.loss.type == loss.value
        sent.extend(payload.model_dump()["data"])
    for row, datum in zip(sent, datums, strict=True):
        assert set(k for k, v in row.items() if v is not None) == {
            "model_input",
            "target_ids",
            "logprobs",
            "advantages",
        }
        assert row["target_ids"] == datum.target_tokens.tolist()
        assert row["model_input"]["chunks"][0]["tokens"] == datum.model_input.tolist()
        advantages = np.asarray(row["advantages"])
        np.testing.assert_array_equal(advantages != 0, datum.mask > 0)
        np.testing.assert_allclose(row["logprobs"], datum.logprobs, rtol=1e-6)


def test_cross_entropy_sends_mask_as_weights(datum_factory) -> None:
    datum = datum_factory(seed=4, vocab=VOCAB)
    sdk_datum = to_sdk_datum(pytrio.types, datum, LossName.CROSS_ENTROPY)
    limits = TrainingLimits(max_batch_size=None, max_tokens_per_request=None, max_seq_len=None)
    plan = plan_training_batch(
        [sdk_datum],
        loss_fn="cross_entropy",
        auto_shift=False,
        limits=limits,
        tokenizer_vocab_size=VOCAB,
    )
    assert plan.totals.total_active_tokens == datum.num_assistant_tokens
    assert list(plan.chunks[0].samples[0].weights) == datum.mask.tolist()


def test_advantage_outside_mask_is_rejected(datum_factory) -> None:
    datum = datum_factory(seed=1, vocab=VOCAB)
    datum.advantages[0] = 1.0  # position 0 is a system-prompt target
    with pytest.raises(ValueError, match="masked position 0"):
        to_sdk_datum(pytrio.types, datum, LossName.PPO)


def test_pytrio_planner_rejects_what_our_limit_check_rejects_first(datum_factory) -> None:
    datum = datum_factory(seed=2, vocab=VOCAB)
    limits = TrainingLimits(max_batch_size=None, max_tokens_per_request=None, max_seq_len=20)
    with pytest.raises(pytrio.PyTrioError, match="max_seq_len"):
        plan_training_batch(
            [to_sdk_datum(pytrio.types, datum, LossName.PPO)],
            loss_fn="ppo",
            auto_shift=False,
            limits=limits,
            tokenizer_vocab_size=VOCAB,
        )


# -- the real SamplingClient over a fake coordinator ---------------------------------------


class FakeSamplingCoordinator:
    """Stands in for the actor coordinator: records requests, answers with fixed tokens."""

    def __init__(self, delay: float = 0.0) -> None:
        self.requests: list[SampleRequest] = []
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def submit(self, request: SampleRequest) -> APIFuture[ActorSampleResponse]:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        stop = request.sampling_params.get("stop_token_ids", [])
        sequences = []
        for i in range(request.num_samples):
            tokens = [10 + i, 20 + i] + ([stop[0]] if i % 2 == 0 and stop else [30])
            reason = "stop" if i % 2 == 0 else "length"
            sequences.append(
                ActorSampleSequence(
                    tokens=tokens, logprobs=[-0.5 - i, -1.0, -0.25], stop_reason=reason
                )
            )
        prompt_logprobs = None
        topk = None
        tokens = [t for chunk in request.prompt.chunks for t in chunk.tokens]
        if request.return_prompt_logprobs:  # a fixed function of each prompt token: -id / 100
            prompt_logprobs = [None, *(-t / 100 for t in tokens[1:])]
        if request.topk_prompt_logprobs:  # the "most likely" token after each prefix: 2 x id
            k = request.topk_prompt_logprobs
            topk = [None, *([(2 * t + j, -0.1 * (j + 1)) for j in range(k)] for t in tokens[:-1])]
        return APIFuture.completed(
            ActorSampleResponse(
                sequences=sequences, prompt_logprobs=prompt_logprobs, topk_prompt_logprobs=topk
            )
        )


def _sampling_client(runner: SDKEventLoopRunner, coordinator: Any) -> SamplingClient:
    return SamplingClient(
        sampling_run_cuid="run",
        model_id="Qwen/Qwen3-0.6B",
        coordinator=coordinator,
        limits=SamplingLimits(max_batch_size=None, max_tokens_per_request=None, max_seq_len=None),
        runtime=_runtime(runner),
    )


async def test_remote_sampler_through_real_sampling_client(sdk_loop) -> None:
    coordinator = FakeSamplingCoordinator()
    sampler = RemoteSampler(_sampling_client(sdk_loop, coordinator))
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=5, stop_tokens=(7, 8), seed=3)
    completions = await sampler.sample([1, 2, 3], 3, params)
    (request,) = coordinator.requests
    assert request.prompt.chunks[0].tokens == [1, 2, 3]
    assert request.num_samples == 3
    assert request.return_token_logprobs is True
    assert request.sampling_params == {
        "max_tokens": 5,
        "seed": 3,
        "temperature": 0.7,
        "top_k": -1,
        "top_p": 0.9,
        "stop_token_ids": [7, 8],
    }
    assert [c.tokens for c in completions] == [(10, 20, 7), (11, 21, 30), (12, 22, 7)]
    assert completions[1].logprobs == (-1.5, -1.0, -0.25)
    assert [c.prefill_tokens for c in completions] == [3, 0, 0]  # one prompt per request
    assert [c.stop_reason for c in completions] == [
        CompletionStop.STOP,
        CompletionStop.LENGTH,
        CompletionStop.STOP,
    ]


async def test_remote_sampler_is_a_teacher_through_real_sampling_client(sdk_loop) -> None:
    """`compute_logprobs` goes through pytrio's own `compute_logprobs_async` (a one-token
    sample request with prompt logprobs) and returns them prompt-aligned, the first None."""
    from agentrl.backends.base import Teacher

    coordinator = FakeSamplingCoordinator()
    sampler = RemoteSampler(_sampling_client(sdk_loop, coordinator))
    assert isinstance(sampler, Teacher)
    logprobs = await sampler.compute_logprobs([4, 50, 7])
    (request,) = coordinator.requests
    assert request.return_prompt_logprobs is True and request.num_samples == 1
    assert request.prompt.chunks[0].tokens == [4, 50, 7]
    assert logprobs == [None, -0.5, -0.07]
    with pytest.raises(ValueError, match="at least one token"):
        await sampler.compute_logprobs([])


async def test_remote_sampler_names_its_top_tokens_through_real_sampling_client(sdk_loop) -> None:
    """`top_tokens` (the teacher-token signal's teacher): one prefill through pytrio's own
    `sample_async` with `topk_prompt_logprobs=1`, the top token of each row, prompt-aligned."""
    from agentrl.backends.base import LabellingTeacher

    coordinator = FakeSamplingCoordinator()
    sampler = RemoteSampler(_sampling_client(sdk_loop, coordinator))
    assert isinstance(sampler, LabellingTeacher)
    labels = await sampler.top_tokens([4, 50, 7])
    (request,) = coordinator.requests
    assert request.topk_prompt_logprobs == 1 and request.return_prompt_logprobs is True
    assert request.num_samples == 1 and request.sampling_params["max_tokens"] == 1
    assert request.prompt.chunks[0].tokens == [4, 50, 7]
    assert labels == [None, 8, 100]  # after [4]: 2 x 4; after [4, 50]: 2 x 50
    with pytest.raises(ValueError, match="top_tokens needs at least one token"):
        await sampler.top_tokens([])


async def test_remote_sampler_bounds_requests_in_flight(sdk_loop) -> None:
    coordinator = FakeSamplingCoordinator(delay=0.02)
    sampler = RemoteSampler(_sampling_client(sdk_loop, coordinator), max_in_flight=2)
    params = SamplingParams(max_tokens=3)
    await asyncio.gather(*(sampler.sample([i + 1], 1, params) for i in range(6)))
    assert len(coordinator.requests) == 6
    assert coordinator.max_in_flight == 2


async def test_remote_sampler_checks_sampling_limit(sdk_loop) -> None:
    coordinator = FakeSamplingCoordinator()
    sampler = RemoteSampler(
        _sampling_client(sdk_loop, coordinator), limits=RemoteLimits(max_sample_len=10)
    )
    with pytest.raises(ValueError, match="sampling limit of 10"):
        await sampler.sample(list(range(1, 8)), 1, SamplingParams(max_tokens=4))
    assert coordinator.requests == []


# -- the real TrainingClient over a fake trainer coordinator --------------------------------


class FakeTrainerCoordinator:
    """Records trainer events; answers like the actor would (ratio 1: logprobs echo back)."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, Any]] = []

    async def submit_group(self, event_type: EventType, payloads: list[Any]) -> APIFuture[Any]:
        responses = []
        for payload in payloads:
            self.events.append((event_type, payload))
            outputs, loss_sum = [], 0.0
            for datum in payload.data:
                logprobs = np.asarray(datum.logprobs, dtype=np.float32)
                outputs.append({"logprobs": WireTensorData.from_numpy(logprobs).model_dump()})
                loss_sum -= float(np.sum(datum.advantages))
            metrics = {
                "loss_sum": loss_sum,
                "loss_mean": 0.0,
                "token_count": payload.gradient_accumulation.total_advantage_tokens,
            }
            responses.append({"result": {"loss_fn_outputs": outputs, "metrics": metrics}})
        return APIFuture.completed(responses)

    async def submit(self, event_type: EventType, payload: Any) -> APIFuture[Any]:
        self.events.append((event_type, payload))
        if event_type is EventType.TRAINER_OPTIMIZE_STEP:
            return APIFuture.completed({"result": {"metrics": {"grad_norm": 0.5}}})
        kind = "state" if event_type is EventType.TRAINER_SAVE_STATE else "weights"
        uri = f"trio://run/{kind}/{payload.name}"
        return APIFuture.completed({"result": {"checkpoint": {"uri": uri, "size_bytes": 1}}})


def _training_client(runner: SDKEventLoopRunner, coordinator: Any) -> TrainingClient:
    lora = LoraRunSpec("Qwen/Qwen3-0.6B", 8, 42, True, True, True, FreshLoraSource())
    return TrainingClient(
        training_run_cuid="run",
        model_id="Qwen/Qwen3-0.6B",
        lora=lora,
        actor_binding=_ReadyTrainingActorBinding(coordinator, ActorHeartbeatHandle()),
        runtime=_runtime(runner),
        service_session_cuid="session",
        limits=TrainingLimits(max_batch_size=2, max_tokens_per_request=None, max_seq_len=None),
        model_alias="Qwen/Qwen3-0.6B",
    )


class LocalTokenizer:
    """A local tokenizer stand-in: pytrio only needs its length."""

    def __len__(self) -> int:
        return VOCAB


async def test_backend_training_path_through_real_training_client(sdk_loop, datum_factory):
    coordinator = FakeTrainerCoordinator()
    client = _training_client(sdk_loop, coordinator)
    backend = PyTrioBackend(
        service=None,
        training_client=client,
        base_model="Qwen/Qwen3-0.6B",
        tokenizer=LocalTokenizer(),  # no download of the base model's tokenizer
        limits=RemoteLimits(max_seq_len=4096),
    )
    datums = [datum_factory(seed=s, vocab=VOCAB, advantage=1.0 - s) for s in range(3)]
    result = await backend.forward_backward(datums, LossName.PPO, LossConfig(0.8, 1.2))
    fb = [p for e, p in coordinator.events if e is EventType.TRAINER_FORWARD_BACKWARD]
    assert [len(p.data) for p in fb] == [2, 1]  # split by the SDK's batch-size limit
    assert fb[0].loss.config == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}
    assert result.num_tokens == sum(d.num_assistant_tokens for d in datums)
    assert result.metrics["loss_sum"] == pytest.approx(
        -sum(float(d.advantages.sum()) for d in datums)
    )

    metrics = await backend.optim_step(AdamParams(learning_rate=1e-6, grad_clip_norm=1.0))
    assert metrics == {"grad_norm": 0.5}
    (opt,) = [p for e, p in coordinator.events if e is EventType.TRAINER_OPTIMIZE_STEP]
    assert opt.adam_params.learning_rate == 1e-6
    assert (opt.adam_params.beta1, opt.adam_params.beta2) == (0.9, 0.95)
    assert opt.adam_params.grad_clip_norm == 1.0

    ref = await backend.save("update-0001")
    assert ref.state_path == "trio://run/state/update-0001"
    assert ref.sampler_path == "trio://run/weights/update-0001"


async def test_backend_fails_early_on_a_datum_that_cannot_fit(sdk_loop, datum_factory):
    coordinator = FakeTrainerCoordinator()
    backend = PyTrioBackend(
        service=None,
        training_client=_training_client(sdk_loop, coordinator),
        base_model="Qwen/Qwen3-0.6B",
        tokenizer=LocalTokenizer(),
        limits=RemoteLimits(max_seq_len=20, max_tokens_per_request=100),
    )
    datums = [datum_factory(seed=0, vocab=VOCAB, prompt_len=4), datum_factory(seed=1)]
    assert len(datums[0]) <= 20 < len(datums[1])
    with pytest.raises(DatumTooLongError, match=r"datum 1 has \d+ tokens .* at most 20"):
        await backend.forward_backward(datums, LossName.PPO, LossConfig())
    assert coordinator.events == []


# The per-update sampler (temporary weights): see test_pytrio_service.py.


# -- live (opt-in) ----------------------------------------------------------------------------


@pytest.mark.live
@pytest.mark.skipif(
    not os.environ.get("AGENTRL_LIVE_PYTRIO"), reason="set AGENTRL_LIVE_PYTRIO=1 (uses credits)"
)
async def test_live_round_trip(datum_factory) -> None:
    model = os.environ.get("AGENTRL_LIVE_MODEL", "Qwen/Qwen3-0.6B")
    backend = await PyTrioBackend.create(model, rank=4, seed=0)
    sampler = await backend.sampler()
    (completion,) = await sampler.sample([9707, 11, 1879], 1, SamplingParams(max_tokens=8))
    assert len(completion.tokens) == len(completion.logprobs) > 0
    datum = datum_factory(seed=0, vocab=1000)
    result = await backend.forward_backward([datum], LossName.PPO, LossConfig())
    assert result.num_tokens == datum.num_assistant_tokens
    await backend.optim_step(AdamParams(learning_rate=1e-6))
    ref = await backend.save("agentrl-live-test")
    assert ref.state_path and ref.sampler_path


@pytest.mark.live
@pytest.mark.skipif(
    not os.environ.get("AGENTRL_LIVE_PYTRIO"), reason="set AGENTRL_LIVE_PYTRIO=1 (uses credits)"
)
async def test_live_recipe_semantics() -> None:
    """On the real service: first-step KL ~ 0, PPO clipping zeroes the gradient of a datum
    whose ratio is pushed out of [0.8, 1.2], and a resume is one run (load adds none)."""
    from agentrl.backends.base import CheckpointRef
    from agentrl.datums import Datum

    model = os.environ.get("AGENTRL_LIVE_MODEL", "Qwen/Qwen3-0.6B")
    backend = await PyTrioBackend.create(model, rank=4, seed=0)
    sampler = await backend.sampler()
    prompt = [9707, 11, 1879, 0]
    (completion,) = await sampler.sample(prompt, 1, SamplingParams(max_tokens=16, seed=1))
    full = np.asarray([*prompt, *completion.tokens], dtype=np.int64)
    n = len(full) - 1
    mask = np.zeros(n, np.float32)
    mask[len(prompt) - 1 :] = 1.0
    logprobs = np.zeros(n, np.float32)
    logprobs[len(prompt) - 1 :] = completion.logprobs

    def datum(old: np.ndarray, advantage: float) -> Datum:
        return Datum(full[:-1], full[1:], old, (mask * advantage).astype(np.float32), mask)

    first = await backend.forward_backward([datum(logprobs, 0.0)], LossName.PPO, LossConfig())
    assert first.mismatch is not None and first.mismatch.sampler_kl < 1e-2
    # ratio = exp(new - old) = e^3 >> 1.2 with a positive advantage: clipped, no gradient.
    pushed = datum((logprobs - 3.0 * mask).astype(np.float32), 1.0)
    await backend.forward_backward([pushed], LossName.PPO, LossConfig(0.8, 1.2))
    metrics = await backend.optim_step(AdamParams(learning_rate=1e-6))
    if "grad_norm" in metrics:
        assert metrics["grad_norm"] < 1e-6
    ref = await backend.save("agentrl-live-semantics")
    resumed = await PyTrioBackend.resume(ref.state_path, base_model=model)
    client = resumed.training_client
    await resumed.load(CheckpointRef(ref.name, ref.state_path, ref.sampler_path))
    assert resumed.training_client is client  # no second run


async def test_cispo_reaches_the_service_and_unsupported_losses_are_refused(
    sdk_loop, datum_factory
) -> None:
    """pytrio 0.2.9 lists cispo (not gspo) in its loss schemas; options the services have no
    setting for (KL to a reference, TIS, other normalisations) are refused before any event."""
    from agentrl.backends.base import LossNormalisation
    from agentrl.backends.pytrio_convert import UnsupportedLossError

    coordinator = FakeTrainerCoordinator()
    backend = PyTrioBackend(
        service=None,
        training_client=_training_client(sdk_loop, coordinator),
        base_model="Qwen/Qwen3-0.6B",
        tokenizer=LocalTokenizer(),
        limits=RemoteLimits(max_seq_len=4096),
    )
    datums = [datum_factory(seed=s, vocab=VOCAB, advantage=1.0 - s) for s in range(2)]
    await backend.forward_backward(datums, LossName.CISPO, LossConfig(0.8, 1.28))
    (fb,) = [p for e, p in coordinator.events if e is EventType.TRAINER_FORWARD_BACKWARD]
    assert fb.loss.type == "cispo"
    assert fb.loss.config == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28}
    for loss, config, match in [
        (LossName.GSPO, LossConfig(), "no server-side 'gspo'"),
        (LossName.PPO, LossConfig(kl_coef=0.1), "kl_coef"),
        (LossName.PPO, LossConfig(tis_cap=2.0), "tis_cap"),
        (LossName.PPO, LossConfig(normalisation=LossNormalisation.SEQUENCE), "normalisation"),
    ]:
        with pytest.raises(UnsupportedLossError, match=match):
            await backend.forward_backward(datums, loss, config)
    assert len(coordinator.events) == 1  # nothing else was sent


def test_sdks_list_the_losses_they_accept() -> None:
    from agentrl.backends.pytrio_convert import check_remote_loss
    from agentrl.backends.pytrio_sdk import PyTrioSdk, TinkerSdk

    pytrio_names = PyTrioSdk().loss_names()
    assert {"ppo", "importance_sampling", "cross_entropy", "cispo"} <= pytrio_names
    assert "gspo" not in pytrio_names
    pytest.importorskip("tinker")
    tinker_names = TinkerSdk().loss_names()
    assert {"ppo", "cispo", "gspo"} <= tinker_names
    check_remote_loss(LossName.GSPO, LossConfig(), tinker_names, "tinker")  # accepted
