"""The PyTRIO backend against pytrio's real client classes, faked only at the network edge
(Control's HTTP API and the Actor transport; see pytrio_fakes.py): which SDK calls are made
for resume, per-update samplers, checkpoints, masking, the mismatch metric and recovery."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pytrio")

from pytrio.client.training import TrainingClient
from pytrio.protocol.actor.events.event import EventType
from pytrio.runtime.event_loop import SDKEventLoopRunner

from agentrl.backends.base import AdamParams, LossConfig, LossName
from agentrl.backends.pytrio import PyTrioBackend
from agentrl.backends.pytrio_convert import IGNORE_INDEX, MaskMode
from agentrl.backends.pytrio_sdk import RECOVERY_TTL_SECONDS, PyTrioSdk
from tests.backends.pytrio_fakes import MODEL, FakeControl, FakeRuntime, service_over

VOCAB = 1000


class LocalTokenizer:
    """A local tokenizer stand-in: pytrio only needs its length."""

    def __len__(self) -> int:
        return VOCAB


@pytest.fixture(scope="module")
def sdk_loop() -> Any:
    runner = SDKEventLoopRunner()
    yield runner
    runner.close()


def _runtime(loop: SDKEventLoopRunner, **kw: Any) -> FakeRuntime:
    control = FakeControl(max_batch_size=kw.pop("max_batch_size", None))
    return FakeRuntime(event_loop=loop, control_client=control, **kw)


async def _backend(runtime: FakeRuntime, **kw: Any) -> PyTrioBackend:
    return await PyTrioBackend.create(
        MODEL, rank=8, service=service_over(runtime), tokenizer=LocalTokenizer(), **kw
    )


async def _update(backend: PyTrioBackend, datums: list[Any]) -> Any:
    result = await backend.forward_backward(datums, LossName.PPO, LossConfig(0.8, 1.2))
    await backend.optim_step(AdamParams(learning_rate=1e-6))
    return result


async def test_resume_is_one_run_restored_with_its_optimizer(sdk_loop, datum_factory) -> None:
    first = _runtime(sdk_loop)
    backend = await _backend(first)
    await _update(backend, [datum_factory(vocab=VOCAB)])
    ref = await backend.save("update-0001")

    runtime = _runtime(sdk_loop)
    runtime.control_client.checkpoints.update(first.control_client.checkpoints)
    resumed = await PyTrioBackend.resume(
        ref.state_path, base_model=MODEL, service=service_over(runtime), tokenizer=LocalTokenizer()
    )
    await resumed.load(ref)  # what the trainer does on --resume: no second run
    await _update(resumed, [datum_factory(vocab=VOCAB)])
    (run,) = runtime.control_client.training_runs
    assert run["source_checkpoint_uri"] == ref.state_path and run["restore_optimizer"] is True
    ((_, init),) = runtime.events(EventType.TRAINER_INIT_RUN)
    assert init["load_optimizer"] is True
    assert len(runtime.events(EventType.TRAINER_FORWARD_BACKWARD)) == 1


async def test_samplers_are_temporary_and_checkpoints_permanent(sdk_loop, datum_factory) -> None:
    runtime = _runtime(sdk_loop)
    backend = await _backend(runtime)
    base = await backend.sampler()
    assert runtime.control_client.sampling_runs == [""]  # the base model, nothing saved
    for update in (1, 2):
        await _update(backend, [datum_factory(seed=update, vocab=VOCAB)])
        sampler = await backend.sampler()
        assert sampler is not base and await backend.sampler() is sampler
        (completion,) = await sampler.sample([1, 2, 3], 1, backend_params())
        assert completion.tokens == (5, 6)
    await backend.save("update-0002")
    weights = [p for _, p in runtime.events(EventType.TRAINER_SAVE_WEIGHTS)]
    states = [p for _, p in runtime.events(EventType.TRAINER_SAVE_STATE)]
    temporary = [p for p in weights if p.get("ttl_seconds") is not None]
    permanent = [p["name"] for p in weights if p.get("ttl_seconds") is None]
    assert len(temporary) == 2 and all(p["visibility"] == "TEMPORARY" for p in temporary)
    assert permanent == ["update-0002"]  # permanent sampler weights only at the checkpoint
    assert [p.get("ttl_seconds") for p in states] == [RECOVERY_TTL_SECONDS] * 2 + [None]
    assert states[-1]["name"] == "update-0002"


async def test_no_recovery_state_when_disabled(sdk_loop, datum_factory) -> None:
    runtime = _runtime(sdk_loop)
    backend = await _backend(runtime, recovery_ttl_seconds=None)
    await _update(backend, [datum_factory(vocab=VOCAB)])
    await backend.sampler()
    assert runtime.events(EventType.TRAINER_SAVE_STATE) == []


@pytest.mark.parametrize("mode", [MaskMode.ZERO_ADVANTAGE, MaskMode.IGNORE_INDEX])
async def test_mask_modes_reach_the_service(sdk_loop, datum_factory, mode: MaskMode) -> None:
    runtime = _runtime(sdk_loop)
    backend = await _backend(runtime, mask_mode=mode)
    datums = [datum_factory(seed=s, vocab=VOCAB, advantage=0.5) for s in range(2)]
    await backend.forward_backward(datums, LossName.PPO, LossConfig())
    ((_, payload),) = runtime.events(EventType.TRAINER_FORWARD_BACKWARD)
    totals = payload["gradient_accumulation"]
    for row, datum in zip(payload["data"], datums, strict=True):
        targets = np.asarray(row["target_ids"])
        if mode is MaskMode.IGNORE_INDEX:
            expected = np.where(datum.mask > 0, datum.target_tokens, IGNORE_INDEX)
        else:
            expected = datum.target_tokens
        np.testing.assert_array_equal(targets, expected)
    # The service's denominator: every target, or only the assistant's.
    if mode is MaskMode.IGNORE_INDEX:
        assert totals["total_active_tokens"] == sum(d.num_assistant_tokens for d in datums)
    else:
        assert totals["total_active_tokens"] == sum(len(d) for d in datums)
    assert totals["total_advantage_tokens"] == sum(d.num_assistant_tokens for d in datums)


def test_tinker_refuses_ignore_index() -> None:
    from agentrl.backends.pytrio_sdk import TinkerSdk

    with pytest.raises(ValueError, match="tinker does not accept"):
        PyTrioBackend(None, None, base_model=MODEL, sdk=TinkerSdk(), mask_mode="ignore_index")


@pytest.mark.parametrize("shift", [0.0, 0.1])
async def test_sampler_trainer_mismatch_metric(sdk_loop, datum_factory, shift: float) -> None:
    runtime = _runtime(sdk_loop, logprob_shift=shift)
    backend = await _backend(runtime)
    datums = [datum_factory(seed=s, vocab=VOCAB) for s in range(3)]
    result = await backend.forward_backward(datums, LossName.PPO, LossConfig())
    assert result.mismatch is not None
    assert result.mismatch.tokens == sum(d.num_assistant_tokens for d in datums)
    if shift == 0.0:  # the trainer recomputes the sampler's logprobs: no mismatch
        assert result.mismatch.sampler_kl == pytest.approx(0.0, abs=1e-9)
        assert result.mismatch.max_abs_diff == pytest.approx(0.0, abs=1e-6)
    else:
        assert result.mismatch.max_abs_diff == pytest.approx(shift, rel=1e-4)
        expected_k3 = np.expm1(shift) - shift
        assert result.mismatch.sampler_kl == pytest.approx(expected_k3, rel=1e-3)


async def test_broken_training_client_is_rebuilt_and_the_update_retried(
    sdk_loop, datum_factory
) -> None:
    # Three datums in chunks of two: the second update's second chunk fails (chunk index 3).
    runtime = _runtime(sdk_loop, max_batch_size=2, fail_chunk=3)
    backend = await _backend(runtime)
    datums = [datum_factory(seed=s, vocab=VOCAB) for s in range(3)]
    await _update(backend, datums)
    ((_, recovery),) = runtime.events(EventType.TRAINER_SAVE_STATE)
    result = await _update(backend, datums)
    assert result.metrics["recovered"] == 1.0 and backend.recoveries == 1
    first, rebuilt = runtime.control_client.training_runs
    assert first["source_checkpoint_uri"] == ""
    assert rebuilt["source_checkpoint_uri"] == f"trio://run-1/state/{recovery['name']}"
    assert rebuilt["restore_optimizer"] is True
    # The whole batch went again to the new run, then the optimizer step.
    by_run = [run for run, _ in runtime.events(EventType.TRAINER_FORWARD_BACKWARD)]
    assert by_run == ["run-1", "run-1", "run-1", "run-1", "run-2", "run-2"]
    assert [run for run, _ in runtime.events(EventType.TRAINER_OPTIMIZE_STEP)] == [
        "run-1",
        "run-2",
    ]


async def test_broken_client_without_saved_state_is_a_clear_error(sdk_loop, datum_factory) -> None:
    runtime = _runtime(sdk_loop, max_batch_size=2, fail_chunk=1)
    backend = await _backend(runtime)
    datums = [datum_factory(seed=s, vocab=VOCAB) for s in range(3)]
    with pytest.raises(RuntimeError, match="no saved state to rebuild it from"):
        await backend.forward_backward(datums, LossName.PPO, LossConfig())


def test_sampling_concurrency_is_configured_before_the_service_client(monkeypatch) -> None:
    import pytrio
    from pytrio.config.config import configuration

    seen: list[int] = []

    class Recorder:  # the ServiceClient authenticates over the network: record instead
        def __init__(self, api_key: str | None = None) -> None:
            seen.append(configuration.sampling_request_max_in_flight)

    before = configuration.sampling_request_max_in_flight
    monkeypatch.setattr(pytrio, "ServiceClient", Recorder)
    try:
        PyTrioSdk().connect("key", max_in_flight=48)
    finally:
        pytrio.configure(sampling_request_max_in_flight=before)
    assert before == 16 and seen == [48]


def test_local_tokenizer_pins_the_sdk_attribute(sdk_loop, monkeypatch) -> None:
    """The adapter sets pytrio's private cached vocabulary size; a rename must fail here."""
    attribute = TrainingClient.__dict__.get("_tokenizer_vocab_size")
    assert isinstance(attribute, functools.cached_property)

    def no_download(self: Any) -> Any:
        raise AssertionError("the SDK tried to load the base model's tokenizer")

    monkeypatch.setattr(TrainingClient, "get_tokenizer", no_download)
    runtime = _runtime(sdk_loop)
    client = TrainingClient.__new__(TrainingClient)
    PyTrioSdk().use_local_tokenizer(client, LocalTokenizer())
    assert client._tokenizer_vocab_size == VOCAB
    del runtime


def backend_params() -> Any:
    from agentrl.backends.base import SamplingParams

    return SamplingParams(max_tokens=4, seed=7)


async def test_train_resume_through_the_recipe_creates_one_run(
    sdk_loop, monkeypatch, tmp_path, qwen_tokenizer
) -> None:
    """`agentrl train --resume` on pytrio: the backend is built from the checkpoint's state
    (one run, optimizer restored), and the trainer's load of that checkpoint adds none."""
    from agentrl import recipe
    from agentrl.config import TrainConfig
    from agentrl.trainer import Trainer

    runtimes: list[FakeRuntime] = []

    def connect(self: PyTrioSdk, api_key: str | None, max_in_flight: int = 64) -> Any:
        runtime = _runtime(sdk_loop)
        for earlier in runtimes:  # checkpoints outlive a process; the service keeps them
            runtime.control_client.checkpoints.update(earlier.control_client.checkpoints)
        runtimes.append(runtime)
        return service_over(runtime)

    monkeypatch.setattr(PyTrioSdk, "connect", connect)

    async def train(max_steps: int, resume: bool) -> None:
        config = TrainConfig(
            backend="pytrio",
            base_model=MODEL,
            env="toy",
            max_steps=max_steps,
            games_per_batch=1,
            group_size=2,
            save_every=1,
            max_episode_steps=2,
            max_trajectory_tokens=4096,
            max_assistant_tokens=8,
            run_dir=tmp_path / "run",
            resume=resume,
        )
        protocol = recipe.tool_protocol_for(config)
        backend = await recipe.training_backend_for(config, qwen_tokenizer)
        trainer = Trainer(
            config=config,
            backend=backend,
            env_factory=recipe.env_factory_for(config),
            tasks=recipe.tasks_for(config, ["train"], limit_per_split=2),
            renderer=recipe.renderer_for(qwen_tokenizer, protocol),
            protocol=protocol,
        )
        await trainer.run()

    await train(1, resume=False)
    await train(2, resume=True)
    first, second = (r.control_client.training_runs for r in runtimes)
    assert len(first) == 1 and first[0]["source_checkpoint_uri"] == ""
    (restored,) = second  # exactly one run on resume
    assert restored["source_checkpoint_uri"] == "trio://run-1/state/update-0001"
    assert restored["restore_optimizer"] is True


async def test_a_state_the_service_cannot_find_is_a_checkpoint_error(sdk_loop) -> None:
    from agentrl.backends.errors import CheckpointError

    runtime = _runtime(sdk_loop)
    with pytest.raises(CheckpointError, match="trio://gone/state/update-0007"):
        await PyTrioBackend.resume(
            "trio://gone/state/update-0007",
            base_model=MODEL,
            service=service_over(runtime),
            tokenizer=LocalTokenizer(),
        )
    assert runtime.control_client.training_runs == []
