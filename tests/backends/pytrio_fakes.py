"""The network edge of pytrio, faked: Control (runs, checkpoints, models) and the Actor's HTTP
transport. Everything above it is pytrio's real code: `ServiceClient`, `TrainingClient`,
`SamplingClient`, the batch planner, and the real `ActorTrainingRunCoordinator` (so a failed
chunk breaks a training client exactly as it does against the service)."""

from __future__ import annotations

import itertools
import types as pytypes
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pytrio.client.service import ServiceClient
from pytrio.config.config import configuration
from pytrio.protocol.actor.events.event import (
    EventFailedResponse,
    EventStatus,
    EventSucceededResponse,
    EventType,
    EventUsage,
)
from pytrio.protocol.actor.events.tensor import WireTensorData
from pytrio.protocol.actor.sampling_run.sample import ActorSampleResponse, ActorSampleSequence
from pytrio.runtime.event_loop import SDKEventLoopRunner
from pytrio.runtime.service import ActorHeartbeatHandle
from pytrio.transport.actor.training_run.coordinator import ActorTrainingRunCoordinator
from pytrio.types.future.api_future import APIFuture

MODEL = "Qwen/Qwen3-0.6B"


def _capability(batch: int | None) -> Any:
    return pytypes.SimpleNamespace(
        max_batch_size=batch, max_tokens_per_request=None, max_seq_len=4096
    )


@dataclass
class FakeControl:
    """Control's HTTP API: records every run it creates."""

    max_batch_size: int | None = None
    training_runs: list[dict[str, Any]] = field(default_factory=list)
    sampling_runs: list[str] = field(default_factory=list)
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    """State path -> the LoRA settings of the run that saved it."""
    _ids: Any = field(default_factory=itertools.count)

    def _actor(self) -> Any:
        return pytypes.SimpleNamespace(actor_cuid=f"actor-{next(self._ids)}")

    async def create_training_run(self, session: str, **request: Any) -> Any:
        self.training_runs.append(request)
        return pytypes.SimpleNamespace(
            training_run_cuid=f"run-{len(self.training_runs)}",
            model_id=MODEL,
            model_alias=MODEL,
            actor=self._actor(),
            actor_jwt="jwt",
            trainer=_capability(self.max_batch_size),
        )

    async def find_training_run_by_checkpoint_uri(self, path: str) -> Any:
        return pytypes.SimpleNamespace(base_model=MODEL, **self.checkpoints[path])

    async def create_sampling_run(self, session: str, **request: Any) -> Any:
        self.sampling_runs.append(request["source_checkpoint_uri"])
        return pytypes.SimpleNamespace(
            sampling_run_cuid=f"sampling-{len(self.sampling_runs)}",
            model_id=MODEL,
            actor=self._actor(),
            actor_jwt="jwt",
            sampler=_capability(None),
        )

    async def get_models(self) -> list[Any]:
        return [
            pytypes.SimpleNamespace(
                model_id=MODEL,
                context_length=32768,
                train_available=True,
                sample_available=True,
                trainer=_capability(self.max_batch_size),
                sampler=_capability(None),
            )
        ]

    async def renew_training_run(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def renew_sampling_run(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class FakeActorHttp:
    """The Actor's HTTP transport of one training run: answers events like a trainer whose
    logprobs equal the sampler's (plus `logprob_shift` on every target), records saves."""

    control: FakeControl
    run: str
    log: list[tuple[str, EventType, dict[str, Any]]]
    fail_chunk: int | None = None
    """Fail the forward_backward chunk with this index (0-based, counted over the run)."""
    logprob_shift: float = 0.0
    actor: Any = field(default_factory=lambda: pytypes.SimpleNamespace(actor_cuid="actor"))
    _chunks: int = 0

    async def schedule_renewal_if_needed(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def submit_event(self, envelope: Any) -> Any:
        payload = dict(envelope.payload)
        self.log.append((self.run, envelope.type, payload))
        usage = EventUsage(input_tokens=0, output_tokens=0)
        common = {"version": envelope.version, "event_id": envelope.event_id, "type": envelope.type}
        if envelope.type is EventType.TRAINER_FORWARD_BACKWARD:
            index, self._chunks = self._chunks, self._chunks + 1
            if index == self.fail_chunk:
                error = {"code": "trainer.oom", "message": "chunk failed"}
                return EventFailedResponse(
                    status=EventStatus.FAILED, error=error, usage=usage, **common
                )
            outputs = []
            for row in payload["data"]:
                values = np.asarray(row["logprobs"], dtype=np.float32) + self.logprob_shift
                outputs.append({"logprobs": WireTensorData.from_numpy(values).model_dump()})
            result: dict[str, Any] = {
                "loss_fn_outputs": outputs,
                "metrics": {"loss_sum": 0.0, "loss_mean": 0.0, "token_count": 1},
            }
        elif envelope.type is EventType.TRAINER_OPTIMIZE_STEP:
            result = {"metrics": {"grad_norm": 0.5}}
        elif envelope.type in (EventType.TRAINER_SAVE_STATE, EventType.TRAINER_SAVE_WEIGHTS):
            kind = "state" if envelope.type is EventType.TRAINER_SAVE_STATE else "weights"
            uri = f"trio://{self.run}/{kind}/{payload['name']}"
            if kind == "state":
                self.control.checkpoints[uri] = {
                    "lora_rank": 8,
                    "seed": 0,
                    "train_mlp": True,
                    "train_attn": True,
                    "train_unembed": True,
                }
            result = {"checkpoint": {"uri": uri, "size_bytes": 1}}
        else:
            result = {}
        return EventSucceededResponse(
            status=EventStatus.SUCCEEDED, result=result, usage=usage, **common
        )

    async def get_event(self, event_id: str) -> Any:
        raise AssertionError("every fake event completes on submit")


class FakeSampling:
    """Stands in for a sampling run's coordinator: fixed tokens, logprobs."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def submit(self, request: Any) -> APIFuture[ActorSampleResponse]:
        self.requests.append(request)
        sequences = [
            ActorSampleSequence(tokens=[5, 6], logprobs=[-0.5, -0.25], stop_reason="stop")
            for _ in range(request.num_samples)
        ]
        return APIFuture.completed(ActorSampleResponse(sequences=sequences))


@dataclass
class FakeRuntime:
    """What pytrio's `ServiceRuntime` hands to its clients, over the fakes above."""

    event_loop: SDKEventLoopRunner
    control_client: FakeControl
    log: list[tuple[str, EventType, dict[str, Any]]] = field(default_factory=list)
    fail_chunk: int | None = None
    logprob_shift: float = 0.0
    telemetry: Any = None
    configuration: Any = field(default_factory=lambda: configuration.model_copy(deep=True))
    samplers: list[FakeSampling] = field(default_factory=list)

    def create_actor_training_run_coordinator(
        self, actor: Any, jwt: Any, renew: Any, *, training_run_cuid: str
    ) -> ActorTrainingRunCoordinator:
        http = FakeActorHttp(
            self.control_client,
            training_run_cuid,
            self.log,
            fail_chunk=self.fail_chunk,
            logprob_shift=self.logprob_shift,
        )
        return ActorTrainingRunCoordinator(
            actor_client=http,  # type: ignore[arg-type]
            training_run_cuid=training_run_cuid,
            runtime_configuration=self.configuration,
        )

    def start_actor_heartbeat(self, actor_client: Any) -> ActorHeartbeatHandle:
        return ActorHeartbeatHandle()

    def create_actor_sampling_run_coordinator(
        self, actor: Any, jwt: Any, renew: Any, *, sampling_run_cuid: str
    ) -> FakeSampling:
        sampler = FakeSampling()
        self.samplers.append(sampler)
        return sampler

    def events(self, kind: EventType) -> list[tuple[str, dict[str, Any]]]:
        """(run, payload) of every event of one kind, in order."""
        return [(run, payload) for run, k, payload in self.log if k is kind]


def service_over(runtime: FakeRuntime) -> ServiceClient:
    """pytrio's real ServiceClient, bound to the fake runtime (no authentication round trip)."""
    service = object.__new__(ServiceClient)
    service._runtime = runtime  # type: ignore[assignment]
    service.service_session_cuid = "session"
    return service
