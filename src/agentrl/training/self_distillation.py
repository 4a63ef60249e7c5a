"""On-policy self-distillation (OPSD): the teacher is the student's own model, shown privileged
context (e.g. the task's solution) that the student's prompt does not hold.

`PrivilegedTeacher(scorer, renderer, context)` scores a student datum by re-rendering the
trajectory's first prompt with `context(trajectory)` added to its last user message, then
asking the scorer (by default the live weights: `backend.sampler`) for the logprobs of the
student's own continuation after that prompt. The student's tokens are never changed: the
scores of its continuation are mapped back onto its positions (the prompt's positions get
None; they are not trained). Where `context` returns None the trajectory is scored as is.

`Distillation(PrivilegedTeacher(...))` in the Trainer (the CLI: `agentrl train --objective
opsd`, with the env's `EnvSpec.privileged` context) trains on
`kl_coef * (teacher - student)`: the student moves towards what it would say if it knew.
Segments are not supported (a datum must start with its trajectory's first prompt: a template
that extends).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from agentrl.backends.base import Sampler, Teacher
from agentrl.chat import ChatRenderer
from agentrl.core.types import Message, Trajectory

__all__ = ["PrivilegedTeacher", "TrajectoryTeacher", "with_context"]


@runtime_checkable
class TrajectoryTeacher(Protocol):
    """A teacher that reads the trajectory a datum was built from (not only its tokens)."""

    async def score(self, trajectory: Trajectory, tokens: Sequence[int]) -> list[float | None]:
        """`len(tokens)` entries, prompt-aligned like `Teacher.compute_logprobs`."""
        ...


def with_context(messages: Sequence[Message], context: str) -> list[Message]:
    """`messages` with `context` appended (after a blank line) to the last user message."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise ValueError("privileged context goes into a user message; the prompt has none")
    last = users[-1]
    out = list(messages)
    out[last] = replace(out[last], content=f"{out[last].content}\n\n{context}")
    return out


class PrivilegedTeacher:
    """The OPSD teacher (see the module docstring)."""

    def __init__(
        self,
        scorer: Callable[[], Awaitable[Sampler]],
        renderer: ChatRenderer,
        context: Callable[[Trajectory], str | None],
    ) -> None:
        self.scorer = scorer
        """Returns the model that scores (the live weights: a backend's `sampler`)."""
        self.renderer = renderer
        self.context = context

    async def _teacher(self) -> Teacher:
        sampler = await self.scorer()
        if not isinstance(sampler, Teacher):
            raise TypeError(f"{type(sampler).__name__} cannot score tokens (compute_logprobs)")
        return sampler

    def privileged_prompt(self, trajectory: Trajectory, context: str) -> list[int]:
        """The trajectory's first prompt rendered again with `context` in it."""
        first = next((i for i, m in enumerate(trajectory.messages) if m.role == "assistant"), None)
        initial = trajectory.messages if first is None else trajectory.messages[:first]
        return self.renderer.initial_prompt(with_context(initial, context))

    async def score(self, trajectory: Trajectory, tokens: Sequence[int]) -> list[float | None]:
        teacher = await self._teacher()
        context = self.context(trajectory)
        if context is None:
            return await teacher.compute_logprobs(tokens)
        prompt = tuple(trajectory.turns[0].prompt_tokens)
        if tuple(tokens[: len(prompt)]) != prompt:
            raise ValueError(
                f"self-distillation: a datum of trajectory {trajectory.group_id}/"
                f"{trajectory.branch} does not start with its first prompt (a template that "
                "cannot be extended starts segments; OPSD needs one that extends)"
            )
        privileged = self.privileged_prompt(trajectory, context)
        scores = await teacher.compute_logprobs([*privileged, *tokens[len(prompt) :]])
        return [None] * len(prompt) + list(scores[len(privileged) :])
