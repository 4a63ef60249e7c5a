"""The EnvGroup contract checker (`check_env_group`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentrl.chat.history import first_difference
from agentrl.core.env import EnvGroup
from agentrl.core.types import EnvAction, EnvStep

ActionChooser = Callable[[EnvStep, random.Random], EnvAction]
"""Picks a valid action for a branch's current step (default: a random admissible action)."""


class EnvCheckError(AssertionError):
    """An EnvGroup broke its contract."""


@dataclass(frozen=True)
class EnvCheckReport:
    """What the checker exercised."""

    group_size: int
    steps_taken: int
    branches_finished: int
    invalid_actions_tried: int


def _visible(step: EnvStep) -> tuple[object, ...]:
    return (
        step.observation,
        step.score,
        step.done,
        step.won,
        step.admissible_actions,
        step.state_key,
        step.error,
    )


_FIELDS = ("observation", "score", "done", "won", "admissible_actions", "state_key", "error")


def _difference(step: EnvStep, reference: EnvStep) -> str:
    """Which field of `step` differs from `reference`, and for text where: the first differing
    character with 40 characters of context on both sides."""
    for name, mine, theirs in zip(_FIELDS, _visible(step), _visible(reference), strict=True):
        if mine == theirs:
            continue
        if isinstance(mine, str) and isinstance(theirs, str):
            return f"{name} {first_difference(theirs, mine, context=40)}"
        return f"{name}: {mine!r} vs {theirs!r}"
    return "no field differs"


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise EnvCheckError(message)


def _check_shape(steps: Sequence[EnvStep], size: int, where: str) -> None:
    _expect(isinstance(steps, list), f"{where}: expected a list of EnvStep, got {type(steps)}")
    _expect(len(steps) == size, f"{where}: expected {size} steps, got {len(steps)}")
    for i, step in enumerate(steps):
        _expect(isinstance(step, EnvStep), f"{where}: item {i} is {type(step)}, not EnvStep")
        _expect(isinstance(step.observation, str), f"{where}: branch {i} observation not str")
        _expect(
            all(isinstance(a, str) for a in step.admissible_actions),
            f"{where}: branch {i} admissible_actions must be strings",
        )


def _random_admissible(step: EnvStep, rng: random.Random) -> EnvAction:
    return rng.choice(step.admissible_actions)


async def check_env_group(
    make_group: Callable[[], EnvGroup],
    *,
    max_steps: int = 60,
    invalid_action: EnvAction = "dance with the ceiling 42",
    seed: int = 0,
    choose_action: ActionChooser | None = None,
    probe_action: EnvAction = "look",
) -> EnvCheckReport:
    """Run the EnvGroup contract checks on a group built by `make_group`; raise on a breach.

    Branch 0 plays valid actions until it finishes (or `max_steps`), the last branch is never
    given an action (it must stay at its initial state), and the middle branches alternate
    between valid and invalid actions. Text-command envs get random admissible actions; a
    function-tool env passes `choose_action` (a valid call tuple for a step), an
    `invalid_action` call tuple the env must report as not admissible and a `probe_action`.
    For call tuples the checker also requires one `outputs` entry per call.
    """
    rng = random.Random(seed)
    group = make_group()
    try:
        size = group.size
        _expect(size >= 1, f"group size must be >= 1, got {size}")
        initial = await group.reset()
        _check_shape(initial, size, "reset()")
        first = _visible(initial[0])
        for i, step in enumerate(initial[1:], start=1):
            _expect(
                _visible(step) == first,
                f"reset(): branch {i} differs from branch 0: {_difference(step, initial[0])}",
            )
        _expect(not initial[0].finished, "reset(): the initial step is already finished")
        if choose_action is None:
            _expect(bool(initial[0].admissible_actions), "reset(): no admissible actions")
        choose = choose_action or _random_admissible

        try:
            await group.step([None] * (size + 1))
        except ValueError:
            pass
        else:
            raise EnvCheckError("step() accepted a list of actions of the wrong length")

        current = list(initial)
        finished_once = [False] * size
        steps_taken = 0
        invalid_tried = 0
        for turn in range(max_steps):
            actions: list[EnvAction | None] = []
            for i, step in enumerate(current):
                if step.finished or (size > 1 and i == size - 1):
                    actions.append(None)
                elif i > 0 and turn % 2 == 1:
                    actions.append(invalid_action)
                    invalid_tried += 1
                else:
                    actions.append(choose(step, rng))
            if all(a is None for a in actions):
                break
            new = await group.step(actions)
            steps_taken += 1
            _check_shape(new, size, f"step() #{turn}")
            for i, (before, after, action) in enumerate(zip(current, new, actions, strict=True)):
                if action is None:
                    _expect(
                        _visible(after) == _visible(before),
                        f"step() #{turn}: branch {i} got None but changed",
                    )
                if action == invalid_action and not before.finished:
                    _expect(
                        not after.admissible,
                        f"step() #{turn}: branch {i} reported invalid action {action!r} "
                        "as admissible",
                    )
                if isinstance(action, tuple) and not before.finished:
                    _expect(
                        len(after.outputs) == len(action),
                        f"step() #{turn}: branch {i} made {len(action)} calls but reported "
                        f"{len(after.outputs)} outputs (EnvStep.outputs: one per call)",
                    )
                if before.finished:
                    _expect(after.finished, f"step() #{turn}: finished branch {i} came back")
                if after.finished:
                    finished_once[i] = True
                if after.won:
                    _expect(after.done, f"step() #{turn}: branch {i} won but is not done")
            current = new

        if size > 1:
            _expect(
                _visible(current[-1]) == _visible(initial[-1]),
                "the branch that never got an action is no longer at its initial state",
            )
        for i, step in enumerate(current):
            if finished_once[i]:
                _expect(step.finished, f"branch {i} finished once but is live again")
        done_branches = [i for i, step in enumerate(current) if step.finished]
        if done_branches:
            probe: list[EnvAction | None] = [None] * size
            probe[done_branches[0]] = probe_action
            try:
                after_probe = await group.step(probe)
            except ValueError:
                pass
            else:
                _expect(
                    after_probe[done_branches[0]].finished,
                    f"an action sent to finished branch {done_branches[0]} revived it",
                )
    finally:
        await group.close()
    await group.close()
    return EnvCheckReport(
        group_size=size,
        steps_taken=steps_taken,
        branches_finished=sum(finished_once),
        invalid_actions_tried=invalid_tried,
    )
