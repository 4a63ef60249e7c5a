"""`AlfworldEnvGroup`: K independent TextWorld environments of one ALFWorld game.

The K engines live in a worker process: one of the group's own (see `workers.py`), or a slot
borrowed from a persistent `EnvWorkerPool` (`pool.py`) that serves every group and update; the
event loop never blocks on TextWorld. `reset()` loads the game K times and checks that every
branch sees the identical initial observation, commands, state and game file.
`step(actions)` advances only branches that got an action. A step that exceeds
`step_timeout`, or a worker that dies, ends the group's live branches with `EnvStep.error`
set (the rollout records `StopReason.ENV_ERROR`); the rest of the batch goes on. `close()` is
idempotent; without a pool it leaves no process behind, with one it returns the engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentrl.core.env import command_of
from agentrl.core.types import EnvAction, EnvStep, TaskInfo
from agentrl.envs.alfworld.engine import ENGINES, EngineStep
from agentrl.envs.alfworld.pool import EnvWorkerPool, WorkerLease
from agentrl.envs.alfworld.workers import BranchReport, GroupWorker, WorkerFailure

__all__ = [
    "AlfworldEnvGroup",
    "AlfworldEnvOptions",
    "AlfworldGroupFactory",
    "alfworld_group_factory",
    "make_alfworld_group",
    "normalize_action",
]

HIDDEN_COMMANDS = frozenset({"help"})
"""Commands the game accepts but that are not listed to the agent."""


@dataclass(frozen=True)
class AlfworldEnvOptions:
    """Options of an ALFWorld EnvGroup."""

    max_steps: int | None = 50
    """Env steps per branch after which the branch ends (`done`, `info['truncated']`)."""
    step_timeout: float = 60.0
    """Seconds one branch's step may take before the worker is killed."""
    load_timeout: float = 180.0
    """Seconds loading (or resetting) one branch may take."""
    engine: str = "fast"
    """Which engine plays the game: "fast" (default) or "textworld" (the stock reference; see
    `agentrl.envs.alfworld.engine.ENGINES`). Both give byte-identical steps."""

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {self.max_steps}")
        if self.step_timeout <= 0 or self.load_timeout <= 0:
            raise ValueError("step_timeout and load_timeout must be > 0")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; available: {sorted(ENGINES)}")


def normalize_action(action: str) -> str:
    """Lower-case an action and collapse its whitespace (ALFWorld commands are lower case)."""
    return " ".join(action.lower().split())


def _error_step(message: str) -> EnvStep:
    return EnvStep(observation=f"Environment error: {message}", error=message)


class AlfworldEnvGroup:
    """K branches of one ALFWorld game (implements `agentrl.core.env.EnvGroup`)."""

    def __init__(
        self,
        task: TaskInfo,
        group_size: int,
        options: AlfworldEnvOptions | None = None,
        pool: EnvWorkerPool | None = None,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        if task.path is None:
            raise ValueError(
                f"task {task.task_id!r} has no path to its game file; build tasks with "
                "GameExample.to_task() (agentrl.envs.alfworld.find_games)"
            )
        if not Path(task.path).is_file():
            raise FileNotFoundError(f"task {task.task_id!r}: game file {task.path} not found")
        self._task = task
        self._size = group_size
        self.options = options or AlfworldEnvOptions()
        self._pool = pool
        """Persistent workers to borrow engines from (None: a worker process of its own)."""
        self._worker: GroupWorker | WorkerLease | None = None
        self._steps: list[EnvStep] = []
        self._commands: list[frozenset[str]] = []
        self._counts: list[int] = []
        self._broken = False
        """An engine raised: its worker is replaced at the next reset."""
        self._closed = False

    @property
    def task(self) -> TaskInfo:
        """The game these branches play."""
        return self._task

    @property
    def size(self) -> int:
        """Number of branches K."""
        return self._size

    @property
    def worker_pid(self) -> int | None:
        """Process id of the worker hosting the engines (None when none runs)."""
        return self._worker.pid if self._worker is not None else None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"AlfworldEnvGroup for {self._task.task_id!r} is closed")

    def _record(self, step: EngineStep, admissible: bool, count: int) -> EnvStep:
        limit = self.options.max_steps
        truncated = not step.done and limit is not None and count >= limit
        done = step.done or truncated
        visible = tuple(c for c in step.admissible_commands if c not in HIDDEN_COMMANDS)
        return EnvStep(
            observation=step.observation,
            score=1.0 if step.won else 0.0,
            done=done,
            won=step.won,
            admissible=admissible,
            admissible_actions=() if done else visible,
            state_key=step.state_key,
            info={"env_steps": count, "truncated": truncated},
        )

    async def _ensure_worker(self) -> GroupWorker | WorkerLease | str:
        if self._worker is not None and self._broken:
            self._worker.kill()
        self._broken = False
        if self._worker is not None and self._worker.alive:
            return self._worker
        options, game = self.options, str(self._task.path)
        try:
            if self._pool is not None:
                self._worker = await self._pool.borrow(
                    options.engine, game, self._size, options.load_timeout
                )
                return self._worker
            worker = GroupWorker(options.engine, game, self._size)
            await worker.start(options.load_timeout)
        except WorkerFailure as failure:
            return str(failure)
        self._worker = worker
        return worker

    async def reset(self) -> list[EnvStep]:
        """Load (once) and reset all K branches; all initial steps are identical."""
        self._check_open()
        worker = await self._ensure_worker()
        if isinstance(worker, str):
            return self._fail_all(worker)
        calls = [(i, None) for i in range(self._size)]
        try:
            reports = await worker.run(calls, self.options.load_timeout)
        except WorkerFailure as failure:
            return self._fail_all(str(failure))
        broken = [r for r in reports if r.step is None]
        if broken:
            return self._fail_all(f"branch {broken[0].branch}: reset failed: {broken[0].error}")
        first = reports[0].step
        assert first is not None
        for report in reports[1:]:
            step = report.step
            assert step is not None
            if (step.observation, step.admissible_commands, step.state_key, step.gamefile) != (
                first.observation,
                first.admissible_commands,
                first.state_key,
                first.gamefile,
            ):
                return self._fail_all(
                    f"branch {report.branch} does not start like branch 0 "
                    f"({step.observation[:60]!r} vs {first.observation[:60]!r})"
                )
        self._counts = [0] * self._size
        self._commands = [frozenset(first.admissible_commands)] * self._size
        self._steps = [self._record(first, True, 0)] * self._size
        return list(self._steps)

    def _fail_all(self, message: str) -> list[EnvStep]:
        if self._worker is not None:
            self._worker.kill()
        self._counts = [0] * self._size
        self._commands = [frozenset()] * self._size
        self._steps = [_error_step(message)] * self._size
        return list(self._steps)

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        """Advance each live branch whose action is not None; return all K current steps."""
        self._check_open()
        if not self._steps:
            raise RuntimeError("AlfworldEnvGroup.step() called before reset()")
        if len(actions) != self._size:
            raise ValueError(f"expected {self._size} actions, got {len(actions)}")
        calls: list[tuple[int, str | None]] = [
            (i, normalize_action(command_of(action)))
            for i, action in enumerate(actions)
            if action is not None and not self._steps[i].finished
        ]
        if not calls:
            return list(self._steps)
        worker = self._worker
        try:
            if worker is None:
                raise WorkerFailure("the worker is not running", calls[0][0])
            reports = await worker.run(calls, self.options.step_timeout)
        except WorkerFailure as failure:
            self._fail_live(failure)
            return list(self._steps)
        for (branch, command), report in zip(calls, reports, strict=True):
            self._apply(branch, command, report)
        return list(self._steps)

    def _apply(self, branch: int, command: str | None, report: BranchReport) -> None:
        self._counts[branch] += 1
        if report.step is None:
            self._broken = True
            self._steps[branch] = _error_step(f"branch {branch}: {report.error}")
            return
        admissible = command in self._commands[branch]
        self._commands[branch] = frozenset(report.step.admissible_commands)
        self._steps[branch] = self._record(report.step, admissible, self._counts[branch])

    def _fail_live(self, failure: WorkerFailure) -> None:
        for i, step in enumerate(self._steps):
            if step.finished:
                continue
            if failure.branch is None or failure.branch == i:
                self._steps[i] = _error_step(str(failure))
            else:
                self._steps[i] = _error_step(
                    f"lost with the worker after branch {failure.branch} failed: {failure}"
                )

    async def close(self) -> None:
        """Stop the worker process; calling it again is harmless."""
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.close()


class AlfworldGroupFactory:
    """An `EnvGroupFactory` of `AlfworldEnvGroup`s with `options`, on the persistent workers of
    `pool` when one is given (else a worker process per group). `close()` stops the pool."""

    def __init__(
        self, options: AlfworldEnvOptions | None = None, pool: EnvWorkerPool | None = None
    ) -> None:
        self.options = options or AlfworldEnvOptions()
        self.pool = pool

    def __call__(self, task: TaskInfo, group_size: int) -> AlfworldEnvGroup:
        return AlfworldEnvGroup(task, group_size, self.options, self.pool)

    async def close(self) -> None:
        """Stop the pool's workers (idempotent; nothing to do without a pool)."""
        if self.pool is not None:
            await self.pool.close()


def alfworld_group_factory(
    options: AlfworldEnvOptions | None = None, pool: EnvWorkerPool | None = None
) -> AlfworldGroupFactory:
    """An `EnvGroupFactory` building `AlfworldEnvGroup`s with `options` (on `pool`'s workers
    when given; whoever passes the pool, or calls `close()`, stops it)."""
    return AlfworldGroupFactory(options, pool)


def make_alfworld_group(task: TaskInfo, group_size: int) -> AlfworldEnvGroup:
    """`EnvGroupFactory` with default options (stock TextWorld engine, 50 steps)."""
    return AlfworldEnvGroup(task, group_size)
