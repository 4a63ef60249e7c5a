"""Drive the stock and the fast engine in lockstep and compare every output.

Used by the differential tests and by `benchmarks/alfworld_env.py`. Each step draws one action
(an admissible command, an invalid command, or the PDDL planner's next command) from the stock
engine's view, sends it to both engines, times each, and records every field that differs.
When an episode ends, both engines are reset and play on, so resets are compared too.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from agentrl.envs.alfworld.fast.branch import FastBranch
from agentrl.envs.alfworld.fast.engine import FastAlfworldEngine
from agentrl.envs.alfworld.fast.records import BranchStep
from agentrl.envs.alfworld.fast.reference import TextWorldBranch

__all__ = [
    "ActionMix",
    "LockstepResult",
    "Mismatch",
    "PlanFollower",
    "choose_action",
    "invalid_command",
    "play",
    "run",
]


@dataclass(frozen=True)
class ActionMix:
    """Probabilities of each kind of action (the rest: random admissible commands)."""

    invalid: float = 0.1
    planner: float = 0.1

    def __post_init__(self) -> None:
        if self.invalid < 0 or self.planner < 0 or self.invalid + self.planner > 1:
            raise ValueError("invalid and planner must be >= 0 and sum to at most 1")


@dataclass(frozen=True)
class Mismatch:
    """One field that differs between the engines after one command."""

    step: int
    command: str | None
    """None for a reset."""
    field: str
    stock: str
    fast: str


@dataclass(frozen=True)
class LockstepResult:
    """The outcome of one game played in lockstep."""

    gamefile: str
    commands: tuple[str, ...]
    mismatches: tuple[Mismatch, ...]
    stock_step_seconds: tuple[float, ...]
    """Time of each stock `PddlEnv.step` (through ALFWorld's wrappers), state key excluded."""
    fast_step_seconds: tuple[float, ...]
    """Time of each fast `FastBranch.step`, its state key included."""
    wins: int
    resets: int

    @property
    def identical(self) -> bool:
        """True when no field ever differed."""
        return not self.mismatches


def invalid_command(rng: random.Random, admissible: tuple[str, ...]) -> str:
    """A command the game should reject, often close to a valid one."""
    base = rng.choice(admissible) if admissible else "look"
    words = base.split()
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice(["jump", "dance around", "xyzzy", "", "   ", "go to", "take", "put"])
    if kind == 1:  # a number that does not exist
        return " ".join(w if not w.isdigit() else str(int(w) + 40) for w in words) + " 99"
    if kind == 2:  # the right words, wrong case
        return base.upper()
    if kind == 3:  # a valid command with extra inner space (stock only strips the ends)
        return base.replace(" ", "  ", 1) if " " in base else base + "  x"
    if kind == 4:
        return f"take {words[-1]} from {words[-1]} 1"
    if kind == 5:
        return base[:-1]
    return f"examine {rng.choice(['ghost', 'apple', 'cabinet 0'])}"


class PlanFollower:
    """The planner's next command, replanning only when the state left the current plan.

    fast-downward's search can take seconds (up to minutes on large games), so a plan is kept
    while the agent follows it: it is reused as long as the state is the one its next step
    starts from (same state key).
    """

    def __init__(self, planner: Callable[[], list[str]]) -> None:
        self._planner = planner
        self._plan: list[str] = []
        self._key: str | None = None
        self._issued: str | None = None

    def next(self, step: BranchStep) -> str | None:
        """The next planned command from the state of `step` (None: no plan)."""
        if step.state_key != self._key or not self._plan:
            self._plan = self._planner()
            self._key = step.state_key
        self._issued = self._plan[0] if self._plan else None
        return self._issued

    def observe(self, command: str, step: BranchStep) -> None:
        """Record what the last command did (advances the plan when it was followed)."""
        if self._issued is not None and command == self._issued and step.executed:
            self._plan.pop(0)
            self._key = step.state_key
        self._issued = None


def choose_action(
    rng: random.Random, step: BranchStep, mix: ActionMix, planner: PlanFollower
) -> str:
    """One action: invalid, the planner's next command, or a random admissible command."""
    draw = rng.random()
    if draw < mix.invalid:
        return invalid_command(rng, step.admissible_commands)
    if draw < mix.invalid + mix.planner:
        planned = planner.next(step)
        if planned is not None:
            return planned
    command = rng.choice(step.admissible_commands)
    if rng.random() < 0.05:
        command = f"  {command} "  # surrounding spaces are stripped by both engines
    return command


def _differences(step: int, command: str | None, a: BranchStep, b: BranchStep) -> list[Mismatch]:
    out = []
    for field in fields(BranchStep):
        left, right = getattr(a, field.name), getattr(b, field.name)
        if left != right:
            out.append(Mismatch(step, command, field.name, repr(left), repr(right)))
    return out


def run(
    gamefile: str,
    *,
    steps: int,
    seed: int,
    engine: FastAlfworldEngine | None = None,
    mix: ActionMix | None = None,
    compare_plans: bool = False,
) -> LockstepResult:
    """Load one game in both engines, then `play` it."""
    stock = TextWorldBranch(gamefile)
    fast = (engine or FastAlfworldEngine()).branch(gamefile)
    try:
        return play(stock, fast, steps=steps, seed=seed, mix=mix, compare_plans=compare_plans)
    finally:
        fast.close()
        stock.close()


def play(
    stock: TextWorldBranch,
    fast: FastBranch,
    *,
    steps: int,
    seed: int,
    mix: ActionMix | None = None,
    compare_plans: bool = False,
) -> LockstepResult:
    """Reset both branches, play `steps` commands through both and compare every output."""
    rng = random.Random(seed)
    mix = mix or ActionMix()
    current = stock.reset()
    mismatches = _differences(0, None, current, fast.reset())
    follower = PlanFollower(stock.plan)
    commands: list[str] = []
    stock_times: list[float] = []
    fast_times: list[float] = []
    wins = resets = 0
    for index in range(1, steps + 1):
        if compare_plans and rng.random() < 0.2:
            stock_plan, fast_plan = stock.plan(), fast.plan()
            if stock_plan != fast_plan:
                mismatches.append(Mismatch(index, None, "plan", repr(stock_plan), repr(fast_plan)))
        command = choose_action(rng, current, mix, follower)
        commands.append(command)
        current = stock.step(command)
        follower.observe(command, current)
        started = time.perf_counter()
        other = fast.step(command)
        fast_times.append(time.perf_counter() - started)
        # stock: the environment's own step only; fast: everything, its state key included
        stock_times.append(stock.last_step_seconds)
        mismatches += _differences(index, command, current, other)
        if current.done or other.done:
            wins += int(current.won)
            resets += 1
            current, other = stock.reset(), fast.reset()
            mismatches += _differences(index, None, current, other)
    return LockstepResult(
        stock.gamefile,
        tuple(commands),
        tuple(mismatches),
        tuple(stock_times),
        tuple(fast_times),
        wins,
        resets,
    )
