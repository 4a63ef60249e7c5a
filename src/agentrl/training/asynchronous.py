"""Fully asynchronous training with partial rollouts: `AsyncGroupSource` (`--async-rollouts`).

Generation never waits for an update to finish, and an update never waits for the slowest
episode of "its" batch. With `G = games_per_batch` and `N = max_staleness`:

- **Games.** Groups are admitted one at a time from the run's seeded game stream: group `i`
  is game `i % G` of batch `i // G` (`task_batch`), played as position `i % G` of the rollout
  call `update {i // G + 1}`, so its sampling seeds are the ones the synchronous run gives it.
- **Admission** (bounded staleness, as in AReaL): while update `n` is the newest update asked
  for, groups are admitted as long as the groups handed out so far plus those running or
  finished-but-not-trained stay below `(n + N) * G` (counted from the run's first update);
  `max_concurrent_games` bounds the running ones.
- **Partial rollouts.** Every request goes to the newest sampler (`VersionedSampler`): when an
  update's weights are installed, requests already in flight finish on the weights they were
  sent to (a service's sampling client keeps serving its weights; the local sampler holds its
  engine lock for a whole decoding batch, so the optimizer step waits for the batch), and the
  episode's next turn samples the new weights. Nothing is interrupted mid-completion.
  Every turn records the policy version that sampled it (`Turn.policy_version`).
- **Staleness.** At update `n` (trained weights: version `n - 1`) a group's staleness is `n - 1`
  minus the oldest policy version among its turns. A group above `N` is dropped or, with
  `StalePolicy.RESAMPLE`, its game is played again from the start: a finished group when an
  update would take it, a running one as soon as a completion shows that it already is too old
  (it is cancelled). So no trained token is older than the bound.
- **An update takes the first `G` groups to finish** (arrival order: that is what lets a long
  episode miss an update instead of holding it up), trained in admission order. Which groups an
  update gets therefore depends on timing when `N >= 1`; every draw of the rollout is still
  keyed, so a group's tokens do not depend on the machine's load, only which update takes it.
- **`N = 0` is the synchronous run exactly**: only update `n`'s `G` groups are admitted, after
  update `n - 1`'s step, with the synchronous labels and positions: the same games, seeds,
  tokens, datums and weights (tested).

The loss sees each token's behaviour logprobs, those of the version that sampled it: by
default PPO's ratio and clip are taken against them (with the dual clip at `N >= 1` on the
local backend); `--tis-cap C` makes it decoupled PPO (docs/losses-and-offpolicy.md says why
the default is not). Resume: as with k-step pipelining, groups in flight are lost
with the process; a resumed run admits update `n`'s games afresh.

Counters (`UpdateMetrics.sampling`): `offpolicy/staleness` (the largest group staleness
trained), `async/token_staleness_mean` (per trained completion token), `async/in_flight`,
`async/carried` (finished, left for a later update), `async/wait_seconds`,
`offpolicy/stale_groups`, `offpolicy/dropped_groups`, `offpolicy/resampled_groups`,
`async/cancelled_groups`, and `stragglers/group_seconds_p50` / `_max` (each trained group's
seconds from its start to its end).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from agentrl.algo.advantages import AdvantageEstimator, ScoredGroup, score_groups
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.backends.versions import VersionedSampler
from agentrl.core.types import Completion, TaskInfo, TrajectoryGroup
from agentrl.training.pipeline import ScoredHook, UpdateGroups
from agentrl.training.play import GroupPlayer

__all__ = ["AsyncGroupSource", "group_staleness", "oldest_version"]


def oldest_version(group: TrajectoryGroup) -> int | None:
    """The oldest policy version among the group's turns (None: no versioned turn)."""
    versions = [
        turn.policy_version
        for trajectory in group.trajectories
        for turn in trajectory.turns
        if turn.policy_version is not None
    ]
    return min(versions) if versions else None


def group_staleness(group: TrajectoryGroup, version: int) -> int:
    """Updates between the oldest weights that sampled `group` and weights `version` (0 for a
    group without versioned turns)."""
    oldest = oldest_version(group)
    return 0 if oldest is None else version - oldest


def _token_staleness(groups: Sequence[TrajectoryGroup], version: int) -> float:
    """Mean staleness over the completion tokens of `groups`."""
    tokens = weighted = 0
    for group in groups:
        for trajectory in group.trajectories:
            for turn in trajectory.turns:
                if turn.policy_version is not None:
                    tokens += len(turn.completion_tokens)
                    weighted += len(turn.completion_tokens) * (version - turn.policy_version)
    return weighted / tokens if tokens else 0.0


class _FlightSampler:
    """One group's view of the shared sampler: remembers the oldest version it was served."""

    def __init__(self, shared: VersionedSampler) -> None:
        self.shared = shared
        self.oldest: int | None = None

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        completions = await self.shared.sample(prompt_tokens, num_samples, params)
        for completion in completions:
            version = completion.policy_version
            if version is not None and (self.oldest is None or version < self.oldest):
                self.oldest = version
        return completions


@dataclass
class _Flight:
    """A group being played."""

    index: int
    task: TaskInfo
    attempt: int
    """0: the game's first play; `a >= 1`: its `a`-th resample."""
    sampler: _FlightSampler
    started: float
    work: asyncio.Task[TrajectoryGroup] | None = None


@dataclass(frozen=True)
class _Finished:
    """A played group waiting for an update."""

    index: int
    group: TrajectoryGroup
    attempt: int
    seconds: float


@dataclass
class _UpdateCounts:
    """What happened to stale groups while one update waited."""

    stale: int = 0
    dropped: int = 0
    resampled: int = 0
    cancelled: int = 0

    def as_counters(self) -> dict[str, float]:
        counters = {"offpolicy/stale_groups": float(self.stale)}
        counters["offpolicy/dropped_groups"] = float(self.dropped)
        counters["offpolicy/resampled_groups"] = float(self.resampled)
        counters["async/cancelled_groups"] = float(self.cancelled)
        return counters


@dataclass(frozen=True)
class _Retry:
    """A stale group's game, to be played again from the start."""

    index: int
    task: TaskInfo
    attempt: int


class AsyncGroupSource:
    """Hands each update the first `groups_per_update` groups to finish among those played
    continuously under a staleness bound (module docstring). Same interface as `GroupSource`
    (`take`, `close`); streaming and dynamic sampling are not combined with it."""

    def __init__(
        self,
        *,
        play: GroupPlayer,
        sampler: Callable[[], Awaitable[Sampler]],
        games: Callable[[int], list[TaskInfo]],
        groups_per_update: int,
        estimator: AdvantageEstimator,
        max_staleness: int = 1,
        max_concurrent: int | None = None,
        resample_stale: bool = False,
        last_update: int | None = None,
    ) -> None:
        if groups_per_update < 1 or max_staleness < 0:
            raise ValueError("groups_per_update must be >= 1 and max_staleness >= 0")
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 or None, got {max_concurrent}")
        self._play = play
        self._sampler = sampler
        self._games = games
        self.size = groups_per_update
        self._estimator = estimator
        self.max_staleness = max_staleness
        self.max_concurrent = max_concurrent
        self.resample_stale = resample_stale
        self.last_update = last_update
        self._shared: VersionedSampler | None = None
        self._first: int | None = None
        self._number = 0
        self._version = 0
        self._next = 0
        self._taken = 0
        self._running: dict[int, _Flight] = {}
        self._finished: list[_Finished] = []
        self._retry: list[_Retry] = []
        self._failure: BaseException | None = None
        self._changed = asyncio.Event()
        self._counts = _UpdateCounts()

    # -- admission -------------------------------------------------------------------------

    def _live(self) -> int:
        return len(self._running) + len(self._finished) + len(self._retry)

    def _allowed(self) -> int:
        """Groups that may be handed out or be on their way, counted from the first update."""
        assert self._first is not None
        newest = self._number + self.max_staleness
        if self.last_update is not None:
            newest = min(newest, self.last_update)
        return (newest - self._first + 1) * self.size

    def _fill(self) -> None:
        """Start groups while the staleness bound and the concurrency cap allow."""
        if self._shared is None or self._failure is not None:
            return
        while self.max_concurrent is None or len(self._running) < self.max_concurrent:
            if self._retry:  # it takes the place of the stale group: no new slot
                retry = self._retry.pop(0)
                self._launch(retry.index, retry.task, retry.attempt)
                continue
            if self._taken + self._live() >= self._allowed():
                return
            index = self._next
            self._next += 1
            self._launch(index, self._games(index // self.size + 1)[index % self.size], 0)

    def _launch(self, index: int, task: TaskInfo, attempt: int) -> None:
        assert self._shared is not None
        sampler = _FlightSampler(self._shared)
        flight = _Flight(index, task, attempt, sampler, time.perf_counter())
        label = f"update {index // self.size + 1}"
        if attempt:
            label += f" resample {attempt}"
        position = index % self.size
        work = asyncio.ensure_future(self._play(task, position, sampler, label))
        flight.work = work
        self._running[index] = flight
        work.add_done_callback(lambda done: self._landed(flight, done))

    def _landed(self, flight: _Flight, done: asyncio.Task[TrajectoryGroup]) -> None:
        if self._running.get(flight.index) is not flight:
            return  # cancelled as stale, or the source was closed
        del self._running[flight.index]
        if done.cancelled():
            self._failure = self._failure or asyncio.CancelledError()
        elif done.exception() is not None:
            self._failure = self._failure or done.exception()
        else:
            seconds = time.perf_counter() - flight.started
            self._finished.append(_Finished(flight.index, done.result(), flight.attempt, seconds))
        self._changed.set()
        self._fill()

    # -- staleness -------------------------------------------------------------------------

    def _too_stale(self, oldest: int | None) -> bool:
        return oldest is not None and self._version - oldest > self.max_staleness

    def _stale(self, index: int, task: TaskInfo, attempt: int) -> None:
        self._counts.stale += 1
        if self.resample_stale:
            self._counts.resampled += 1
            self._retry.append(_Retry(index, task, attempt))
        else:
            self._counts.dropped += 1

    def _cancel_stale_running(self) -> None:
        for index, flight in list(self._running.items()):
            if self._too_stale(flight.sampler.oldest):
                del self._running[index]
                assert flight.work is not None
                flight.work.cancel()
                self._counts.cancelled += 1
                self._stale(index, flight.task, flight.attempt + 1)

    def _fresh_finished(self) -> list[_Finished]:
        """The finished groups within the bound (in arrival order); stale ones leave."""
        fresh: list[_Finished] = []
        for item in self._finished:
            if self._too_stale(oldest_version(item.group)):
                self._stale(item.index, item.group.task, item.attempt + 1)
            else:
                fresh.append(item)
        self._finished = fresh
        return fresh

    # -- the update's groups ---------------------------------------------------------------

    async def _install(self, version: int) -> None:
        if self._shared is None:
            self._shared = VersionedSampler(await self._sampler(), version)
        elif self._shared.version != version:
            self._shared.install(await self._sampler(), version)

    async def take(
        self, number: int, version: int, on_group: ScoredHook | None = None
    ) -> UpdateGroups:
        """The scored groups of update `number`; `version` = updates completed so far."""
        if on_group is not None:
            raise ValueError(
                "streaming groups (on_group) is not combined with asynchronous rollouts: an "
                "update's groups are only known when the first G of them have finished"
            )
        if self._first is None:
            self._first, self._next = number, (number - 1) * self.size
        self._number, self._version = number, version
        self._counts = _UpdateCounts()
        await self._install(version)
        clock = time.perf_counter()
        while True:
            self._raise_failure()
            self._cancel_stale_running()
            fresh = self._fresh_finished()
            self._fill()
            if len(fresh) >= self.size:
                break
            if not self._running and not self._retry:
                raise RuntimeError(
                    f"update {number} needs {self.size} groups but only {len(fresh)} can be "
                    "played within the staleness bound"
                )
            self._changed.clear()
            await self._changed.wait()
        waited = time.perf_counter() - clock
        chosen = sorted(fresh[: self.size], key=lambda item: item.index)
        self._finished = fresh[self.size :]
        self._taken += self.size
        self._fill()
        return self._update_groups(chosen, waited)

    def _update_groups(self, chosen: Sequence[_Finished], waited: float) -> UpdateGroups:
        groups = [item.group for item in chosen]
        clock = time.perf_counter()
        scored: tuple[ScoredGroup, ...] = score_groups(self._estimator, groups)
        seconds = time.perf_counter() - clock
        counters = self._counts.as_counters()
        staleness = [group_staleness(g, self._version) for g in groups]
        counters["offpolicy/staleness"] = float(max(staleness, default=0))
        counters["async/token_staleness_mean"] = _token_staleness(groups, self._version)
        counters["async/in_flight"] = float(len(self._running))
        counters["async/carried"] = float(len(self._finished))
        counters["async/wait_seconds"] = waited
        times = np.asarray([item.seconds for item in chosen], dtype=np.float64)
        if times.size:
            counters["stragglers/group_seconds_p50"] = float(np.median(times))
            counters["stragglers/group_seconds_max"] = float(times.max())
        return UpdateGroups(scored, counters, seconds)

    def _raise_failure(self) -> None:
        failure = self._failure
        if failure is not None:
            raise RuntimeError(f"a group rollout failed: {failure!r}") from failure

    async def close(self) -> None:
        """Cancel the groups in flight (they are never trained)."""
        flights, self._running = list(self._running.values()), {}
        works = [f.work for f in flights if f.work is not None]
        for work in works:
            work.cancel()
        await asyncio.gather(*works, return_exceptions=True)
        self._finished, self._retry = [], []
