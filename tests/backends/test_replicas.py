"""`ReplicaSampler` under real rollouts (toy env, real Qwen tokenizer): each group stays on one
replica, new groups are dealt out evenly, a failing replica is taken out and its requests
retried on another, and routing never changes what a seeded sampler samples."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentrl.backends import ReplicaFailure, ReplicaSampler, ReplicaTeacher
from agentrl.backends.base import Sampler, SamplingParams, Teacher
from agentrl.chat import ChatRenderer
from agentrl.core.types import Completion, CompletionStop, StopReason, TrajectoryGroup
from agentrl.envs.toy import make_toy_group, toy_tasks
from agentrl.envs.toy.plain import PlainCommands, uniform_command
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.testing import KeyedPolicySampler

K = 3
CONFIG = RolloutConfig(
    group_size=K,
    max_env_steps=3,
    max_assistant_tokens=32,
    max_trajectory_tokens=4000,
    sampling=SamplingParams(seed=7),
    sampler_retries=0,  # the router's own retry is what is tested
    retry_backoff=0.0,
)
PARAMS = SamplingParams(max_tokens=8, seed=1)


class Edge:
    """A replica behind a network edge: records every request, may wait, and raises
    `ConnectionError` from its `fail_at`-th request on (a dead server stays dead)."""

    def __init__(self, inner: Sampler, *, fail_at: int | None = None, delay: float = 0.0) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.delay = delay
        self.calls: list[tuple[tuple[int, ...], int]] = []
        self.served: list[tuple[tuple[int, ...], int]] = []
        self.closed = 0

    def _check(self, prompt: tuple[int, ...], samples: int) -> None:
        self.calls.append((prompt, samples))
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise ConnectionError(f"connection reset by peer (request {len(self.calls)})")

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        prompt = tuple(prompt_tokens)
        await asyncio.sleep(self.delay)
        self._check(prompt, num_samples)
        completions = await self.inner.sample(prompt, num_samples, params)
        self.served.append((prompt, num_samples))
        return completions

    async def close(self) -> None:
        self.closed += 1


class TeacherEdge(Edge):
    """An `Edge` that also scores tokens: every logprob is `-tag` (which replica answered)."""

    def __init__(self, inner: Sampler, tag: float, **kwargs: Any) -> None:
        super().__init__(inner, **kwargs)
        self.tag = tag

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        self._check(tuple(tokens), 1)
        return [None, *([-self.tag] * (len(tokens) - 1))]


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer)


def policy(tokenizer: Any) -> KeyedPolicySampler:
    return KeyedPolicySampler(tokenizer, uniform_command)


async def play(
    sampler: Sampler,
    renderer: ChatRenderer,
    games: int = 4,
    config: RolloutConfig = CONFIG,
    concurrent: int = 8,
) -> list[TrajectoryGroup]:
    return await rollout_batch(
        toy_tasks(games, seed=0),
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PlainCommands(),
        config=config,
        max_concurrent_groups=concurrent,
    )


def groups_by_replica(edges: Sequence[Edge]) -> dict[tuple[int, ...], set[int]]:
    """For each group (its first prompt), the replicas that served any of its requests."""
    firsts = {p for edge in edges for p, n in edge.served if n == K}
    out: dict[tuple[int, ...], set[int]] = {f: set() for f in firsts}
    for index, edge in enumerate(edges):
        for prompt, _ in edge.served:
            (first,) = [f for f in firsts if prompt[: len(f)] == f]
            out[first].add(index)
    return out


def stop_reasons(groups: Sequence[TrajectoryGroup]) -> list[StopReason]:
    return [t.stop_reason for g in groups for t in g.trajectories]


@pytest.mark.parametrize("delay", [0.0, 0.002])
async def test_every_turn_of_a_group_goes_to_one_replica(
    qwen_tokenizer: Any, renderer: ChatRenderer, delay: float
) -> None:
    edges = [Edge(policy(qwen_tokenizer), delay=delay) for _ in range(2)]
    router = ReplicaSampler(edges, block_tokens=16)
    groups = await play(router, renderer)
    assert StopReason.SAMPLER_ERROR not in stop_reasons(groups)
    placed = groups_by_replica(edges)
    assert len(placed) == 4
    assert all(len(replicas) == 1 for replicas in placed.values()), placed.values()
    later = sum(n == 1 for edge in edges for _, n in edge.served)
    assert later >= 4 * K  # branches played later turns, each routed by its prefix
    assert sum(s.affinity for s in router.stats) == later
    assert [s.placed for s in router.stats] == [2, 2]
    assert all(s.requests == s.affinity + s.placed for s in router.stats)


@pytest.mark.parametrize(("delay", "concurrent"), [(0.0, 1), (0.0, 8), (0.002, 8)])
async def test_new_groups_are_dealt_out_evenly(
    qwen_tokenizer: Any, renderer: ChatRenderer, delay: float, concurrent: int
) -> None:
    # One group at a time (nothing in flight when a group starts) or all together.
    edges = [Edge(policy(qwen_tokenizer), delay=delay) for _ in range(2)]
    await play(ReplicaSampler(edges), renderer, concurrent=concurrent)
    assert [sum(n == K for _, n in edge.calls) for edge in edges] == [2, 2]


async def test_a_failing_replica_is_taken_out_and_its_requests_retried(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    edges = [Edge(policy(qwen_tokenizer), fail_at=3, delay=0.001), Edge(policy(qwen_tokenizer))]
    router = ReplicaSampler(edges)
    groups = await play(router, renderer)
    assert StopReason.SAMPLER_ERROR not in stop_reasons(groups)
    assert all(len(t.turns) >= 1 for g in groups for t in g.trajectories)
    assert router.live == (1,)
    dead, alive = router.stats
    assert not dead.live and dead.error is not None and "ConnectionError" in dead.error
    assert dead.failures >= 1 and alive.retries == dead.failures
    assert len(edges[0].calls) == 2 + dead.failures  # nothing was sent after it was taken out
    # Every completion a trajectory played was served exactly once, failed requests included.
    served = sum(n for edge in edges for _, n in edge.served)
    assert served == sum(len(t.turns) for g in groups for t in g.trajectories)


async def test_when_every_replica_fails_the_branches_record_sampler_error(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    edges = [Edge(policy(qwen_tokenizer), fail_at=1), Edge(policy(qwen_tokenizer), fail_at=1)]
    router = ReplicaSampler(edges)
    groups = await play(router, renderer, games=2)
    trajectories = [t for g in groups for t in g.trajectories]
    assert {t.stop_reason for t in trajectories} == {StopReason.SAMPLER_ERROR}
    for trajectory in trajectories:
        assert trajectory.error is not None
        assert "replica 0" in trajectory.error and "replica 1" in trajectory.error
        assert "ConnectionError" in trajectory.error
    assert router.live == ()
    # Each group's first request was tried on two replicas at most; once both were out,
    # nothing more was sent.
    calls = [len(edge.calls) for edge in edges]
    assert 2 <= sum(calls) <= 4
    with pytest.raises(ReplicaFailure, match="no live replica") as caught:
        await router.sample([1, 2, 3], 1, PARAMS)
    assert [i for i, _ in caught.value.errors] == [0, 1]
    assert [len(edge.calls) for edge in edges] == calls


def test_replicas_do_not_change_seeded_results(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentrl.backends.local import LocalBackend, LocalSampler

    engine = LocalBackend.tiny(qwen_tokenizer, seed=0, device="cpu").engine
    config = RolloutConfig(
        group_size=2,
        max_env_steps=2,
        max_assistant_tokens=6,
        max_trajectory_tokens=4000,
        sampling=SamplingParams(temperature=1.0, seed=11),
    )

    def tokens(groups: list[TrajectoryGroup]) -> list[Any]:
        return [
            [(turn.prompt_tokens, turn.completion_tokens, turn.logprobs) for turn in t.turns]
            for g in groups
            for t in g.trajectories
        ]

    single = asyncio.run(play(LocalSampler(engine), renderer, config=config))
    replicas = [LocalSampler(engine), LocalSampler(engine)]
    router = ReplicaSampler(replicas)
    routed = asyncio.run(play(router, renderer, config=config))
    assert [s.requests > 0 for s in router.stats] == [True, True]
    assert all(len(t.turns) == 2 for g in routed for t in g.trajectories)
    assert tokens(routed) == tokens(single)


async def test_compute_logprobs_follows_the_prefix_and_fails_over(qwen_tokenizer: Any) -> None:
    edges = [TeacherEdge(policy(qwen_tokenizer), tag=float(i + 1)) for i in range(2)]
    router = ReplicaTeacher(edges, block_tokens=4)
    assert isinstance(router, Teacher)
    first = [11, 12, 13, 14, 15, 16]
    await router.compute_logprobs([21, 22, 23])  # a new prompt: to replica 0
    await router.compute_logprobs(first)  # a new prompt: to replica 1, now less used
    scored = await router.compute_logprobs([*first, 17, 18])  # extends a prompt replica 1 had
    assert scored == [None, *([-2.0] * 7)]
    assert [len(edge.calls) for edge in edges] == [1, 2]
    edges[1].fail_at = 1
    assert await router.compute_logprobs([*first, 19]) == [None, *([-1.0] * 6)]
    assert router.live == (0,)


def test_only_teachers_make_a_replica_teacher(qwen_tokenizer: Any) -> None:
    plain = [Edge(policy(qwen_tokenizer)), Edge(policy(qwen_tokenizer))]
    assert not isinstance(ReplicaSampler(plain), Teacher)
    with pytest.raises(TypeError, match=r"replica 0 .* is not a Teacher"):
        ReplicaTeacher(plain)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one replica"):
        ReplicaSampler([])


class Answers:
    """A sampler answering every request with `len(prompt)` as its one token, after `delay`;
    raises `error` instead when one is set."""

    def __init__(self, delay: float = 0.0, error: Exception | None = None) -> None:
        self.delay = delay
        self.error = error
        self.prompts: list[tuple[int, ...]] = []

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        self.prompts.append(tuple(prompt_tokens))
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        one = Completion((len(prompt_tokens),), (-0.5,), CompletionStop.STOP)
        return [one] * num_samples


async def test_a_new_request_goes_where_fewest_samples_are_in_flight() -> None:
    a, b = Answers(delay=0.05), Answers(delay=0.05)
    router = ReplicaSampler([a, b])
    big = asyncio.create_task(router.sample([1, 2, 3], 4, PARAMS))  # replica 0: 4 in flight
    await asyncio.sleep(0)
    small = asyncio.create_task(router.sample([5, 6], 1, PARAMS))  # replica 1: 1 in flight
    await asyncio.sleep(0)
    assert [s.in_flight for s in router.stats] == [4, 1]
    await router.sample([7, 8], 1, PARAMS)  # one new request each so far: load decides
    await asyncio.gather(big, small)
    assert a.prompts == [(1, 2, 3)]
    assert b.prompts == [(5, 6), (7, 8)]
    assert [s.in_flight for s in router.stats] == [0, 0]


async def test_a_bad_request_raises_without_taking_the_replica_out() -> None:
    bad = Answers(error=ValueError("prompt longer than max_model_len"))
    router = ReplicaSampler([bad, Answers()])
    with pytest.raises(ValueError, match="max_model_len"):
        await router.sample([1, 2, 3], 1, PARAMS)
    assert router.live == (0, 1) and router.stats[0].failures == 0


async def test_a_replica_that_does_not_answer_in_time_is_taken_out() -> None:
    slow, quick = Answers(delay=5.0), Answers()
    router = ReplicaSampler([slow, quick], timeout=0.05)
    (completion,) = await router.sample([1, 2, 3], 1, PARAMS)
    assert completion.tokens == (3,)
    assert router.live == (1,)
    assert router.stats[0].error == "TimeoutError: no answer within 0.05 s"
    assert router.stats[1].retries == 1 and router.stats[1].in_flight == 0


async def test_a_cancelled_request_is_not_a_failure() -> None:
    router = ReplicaSampler([Answers(delay=5.0), Answers()])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(router.sample([1, 2], 1, PARAMS), 0.02)  # the caller gave up
    assert router.live == (0, 1)
    assert [(s.requests, s.in_flight, s.failures) for s in router.stats] == [(1, 0, 0), (0, 0, 0)]


async def test_forgotten_prefixes_route_as_new_requests() -> None:
    a, b = Answers(), Answers()
    router = ReplicaSampler([a, b], block_tokens=2, max_prefixes=1)
    await router.sample([1, 2, 3], 2, PARAMS)  # replica 0
    await router.sample([5, 6, 7], 2, PARAMS)  # replica 1
    await router.sample([1, 2, 3, 4], 1, PARAMS)  # extends a prompt replica 0 remembers
    await router.sample([9, 9], 1, PARAMS)  # new: 1 new request each, so the lower index
    await router.sample([5, 6, 7, 8], 1, PARAMS)  # replica 1 still remembers [5, 6, 7]
    await router.sample(
        [1, 2, 3, 4, 5], 1, PARAMS
    )  # replica 0 forgot [1, 2, 3, 4]: new, to replica 1
    assert a.prompts == [(1, 2, 3), (1, 2, 3, 4), (9, 9)]
    assert b.prompts == [(5, 6, 7), (5, 6, 7, 8), (1, 2, 3, 4, 5)]


async def test_close_closes_the_replicas_once(qwen_tokenizer: Any) -> None:
    edges = [Edge(policy(qwen_tokenizer)), Edge(policy(qwen_tokenizer))]
    router = ReplicaSampler([*edges, Answers()])  # Answers has no close()
    await router.close()
    await router.close()
    assert [edge.closed for edge in edges] == [1, 1]
    with pytest.raises(RuntimeError, match="closed"):
        await router.sample([1], 1, PARAMS)


async def test_a_replica_taken_out_is_tried_again_after_readmit_after() -> None:
    flaky, steady = Answers(), Answers()
    router = ReplicaSampler([flaky, steady], readmit_after=0.2)
    flaky.error = ConnectionError("connection refused")
    await router.sample([1, 2, 3], 1, PARAMS)  # flaky fails, steady serves it
    await router.sample([9], 1, PARAMS)  # within the cool-down: steady again
    assert router.live == (1,) and flaky.prompts == [(1, 2, 3)]
    flaky.error = None  # its engine came back
    await asyncio.sleep(0.25)
    await router.sample([4, 5], 1, PARAMS)  # a new group: flaky gets one request, and succeeds
    assert flaky.prompts == [(1, 2, 3), (4, 5)] and router.live == (0, 1)
