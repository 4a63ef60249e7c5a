"""LLM-judge rewards: a rubric, a transcript, a score line, retries and a content-keyed cache.

`Judge` is a `GroupReward` that scores every trajectory of a group on its own: it shows the
judge model the rubric and the trajectory's transcript (the task, then each assistant reply and
tool result, long texts cut in the middle), asks for a final line `SCORE: X` with X in
[0, `scale`], and gives reward `X / scale`. A reply without a score line in range is asked again
(`attempts` in all); a model that raises is retried the same way. When every attempt fails the
trajectory gets `reward_error` (left out of its group's statistics), never 0. The judge's reply
is kept as the trajectory's `reward_detail` (the record and the viewer show it). Answers are
cached by the content of what was asked (rubric + transcript), so a trajectory seen again (an
evaluation replayed, identical branches) is not judged twice. Trajectories that ended in an
infrastructure error are not judged (their reward does not count anyway).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from agentrl.algo.rewards import RewardOutcome, last_turn_rewards
from agentrl.core.types import Message, Trajectory
from agentrl.judges.models import JudgeModel

__all__ = ["DEFAULT_RUBRIC", "Judge", "JudgeAsker", "parse_score", "transcript"]

T = TypeVar("T")

DEFAULT_RUBRIC = (
    "Score how well the agent accomplished the task given in the first message, judging only "
    "by the transcript: full marks for a task clearly and correctly completed, partial credit "
    "for real progress, none for no progress or for claiming success without doing the work."
)

JUDGE_SYSTEM = (
    "You are a strict, fair evaluator of an AI agent's episode. Read the rubric and the "
    "transcript, reason briefly, then end your reply with one line of the exact form "
    "'SCORE: X'."
)

_SCORE = re.compile(r"SCORE:\s*\**\s*([-+]?\d+(?:\.\d+)?)", re.IGNORECASE)


def _cut(text: str, limit: int) -> str:
    """`text`, its middle replaced by a marker when it is longer than `limit` characters."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def transcript(
    trajectory: Trajectory, *, message_chars: int = 2000, total_chars: int = 16000
) -> str:
    """The trajectory as plain text for a judge: the task (first user message), then every
    later message labelled by role (and tool name), each cut to `message_chars`, the whole to
    `total_chars`."""
    lines: list[str] = []
    seen_user = False
    for message in trajectory.messages:
        if message.role == "system":
            continue
        if message.role == "user" and not seen_user:
            seen_user = True
            lines.append(f"TASK:\n{_cut(message.content, message_chars)}")
            continue
        label = message.role.upper() + (f" ({message.name})" if message.name else "")
        lines.append(f"{label}:\n{_cut(message.content, message_chars)}")
    outcome = "the environment reported success" if trajectory.won else "no success reported"
    lines.append(f"END OF EPISODE ({trajectory.stop_reason.value}; {outcome}).")
    return _cut("\n\n".join(lines), total_chars)


@dataclass
class JudgeAsker(Generic[T]):
    """Asks a judge model with retries and caches parsed answers by the question's content."""

    model: JudgeModel
    attempts: int = 3
    max_concurrent: int = 8
    cache_size: int = 10_000
    calls: int = 0
    """Requests sent to the model (cache hits send none)."""
    _cache: OrderedDict[str, tuple[T, str]] = field(default_factory=OrderedDict, repr=False)
    _limit: asyncio.Semaphore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")

    async def ask(
        self, messages: Sequence[Message], parse: Callable[[str], T | str]
    ) -> tuple[T, str] | str:
        """(parsed answer, reply), or the reason every attempt failed. `parse` returns the
        answer or, as a string, what is wrong with the reply."""
        key = hashlib.sha256("\0".join(m.role + "\0" + m.content for m in messages).encode())
        digest = key.hexdigest()
        if digest in self._cache:
            self._cache.move_to_end(digest)
            return self._cache[digest]
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.max_concurrent)
        problem = ""
        for attempt in range(1, self.attempts + 1):
            async with self._limit:
                self.calls += 1
                try:
                    reply = await self.model.reply(messages)
                except Exception as exc:
                    problem = (
                        f"attempt {attempt}: the judge model failed: {type(exc).__name__}: {exc}"
                    )
                    continue
            parsed = parse(reply)
            if not isinstance(parsed, str):
                self._cache[digest] = (parsed, reply)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
                return parsed, reply
            problem = f"attempt {attempt}: {parsed}; reply: {_cut(reply.strip(), 300)!r}"
        return f"no usable judgement after {self.attempts} attempts ({problem})"


def parse_score(reply: str, scale: float) -> float | str:
    """The last `SCORE: X` of `reply` as `X / scale`, or what is wrong."""
    found = _SCORE.findall(reply)
    if not found:
        return "no 'SCORE: X' line"
    value = float(found[-1])
    if not 0 <= value <= scale:
        return f"score {value:g} is outside [0, {scale:g}]"
    return value / scale


@dataclass
class Judge:
    """A rubric-scored LLM-judge reward (a `GroupReward`; see the module docstring)."""

    model: JudgeModel
    rubric: str = DEFAULT_RUBRIC
    scale: float = 10.0
    """Scores are asked for in [0, scale] and divided by it (rewards in [0, 1])."""
    attempts: int = 3
    max_concurrent: int = 8
    message_chars: int = 2000
    total_chars: int = 16000
    asker: JudgeAsker[float] = field(init=False)

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")
        self.asker = JudgeAsker(self.model, self.attempts, self.max_concurrent)

    def messages(self, trajectory: Trajectory) -> list[Message]:
        """What the judge model is asked about `trajectory`."""
        text = transcript(
            trajectory, message_chars=self.message_chars, total_chars=self.total_chars
        )
        body = (
            f"RUBRIC:\n{self.rubric}\n\nTRANSCRIPT:\n{text}\n\n"
            f"Give a score from 0 to {self.scale:g}. End with the line 'SCORE: X'."
        )
        return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=body)]

    async def score(self, trajectory: Trajectory) -> RewardOutcome:
        """The outcome of one trajectory."""
        if not trajectory.turns or trajectory.stop_reason.is_error:
            return RewardOutcome(0.0)
        answer = await self.asker.ask(
            self.messages(trajectory), lambda r: parse_score(r, self.scale)
        )
        if isinstance(answer, str):
            return RewardOutcome(None, error=answer)
        value, reply = answer
        return RewardOutcome(value, detail=reply)

    async def score_group(self, trajectories: Sequence[Trajectory]) -> Sequence[RewardOutcome]:
        """Every trajectory judged on its own, concurrently (`max_concurrent` at a time)."""
        return await asyncio.gather(*(self.score(t) for t in trajectories))

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """The judged reward on the last turn."""
        return last_turn_rewards(trajectory)
