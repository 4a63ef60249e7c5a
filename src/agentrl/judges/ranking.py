"""A group reward that ranks the K branches of one task against each other (RULER-style).

Relative judgements are easier and more consistent than absolute ones: the judge model sees the
rubric and every branch's transcript, labelled `TRAJECTORY 1 ... K`, and scores each in [0, 1]
relative to the others, one line `TRAJECTORY i: SCORE x` per branch. Only the differences inside
a group matter to a group-relative advantage, which is what GRPO-style estimators use. A reply
that does not score every branch exactly once is asked again; when every attempt fails, every
judged branch of the group gets `reward_error` (the group is then left out, never scored 0).
Branches that ended in an infrastructure error are not shown to the judge (reward 0, and they
are left out of the statistics anyway).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentrl.algo.rewards import RewardOutcome, last_turn_rewards
from agentrl.core.types import Message, Trajectory
from agentrl.judges.judge import DEFAULT_RUBRIC, JudgeAsker, transcript
from agentrl.judges.models import JudgeModel

__all__ = ["RankingJudge", "parse_ranking"]

RANKING_SYSTEM = (
    "You compare several attempts of an AI agent at the same task. Read the rubric and every "
    "transcript, reason briefly, then end your reply with one line per attempt, of the exact "
    "form 'TRAJECTORY i: SCORE x', with x between 0 and 1, higher for better attempts."
)

_LINE = re.compile(r"TRAJECTORY\s+(\d+)\s*:\s*SCORE\s*:?\s*([-+]?\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_ranking(reply: str, count: int) -> tuple[float, ...] | str:
    """Scores 1..`count` from `reply`'s `TRAJECTORY i: SCORE x` lines, or what is wrong."""
    scores: dict[int, float] = {}
    for index, value in _LINE.findall(reply):
        i = int(index)
        if not 1 <= i <= count:
            return f"trajectory {i} does not exist (1..{count})"
        if i in scores:
            return f"trajectory {i} is scored twice"
        score = float(value)
        if not 0 <= score <= 1:
            return f"trajectory {i}'s score {score:g} is outside [0, 1]"
        scores[i] = score
    missing = [i for i in range(1, count + 1) if i not in scores]
    if missing:
        return f"no score for trajectory {', '.join(map(str, missing))}"
    return tuple(scores[i] for i in range(1, count + 1))


@dataclass
class RankingJudge:
    """Scores a group's branches relative to each other (a `GroupReward`)."""

    model: JudgeModel
    rubric: str = DEFAULT_RUBRIC
    attempts: int = 3
    max_concurrent: int = 8
    message_chars: int = 1000
    total_chars: int = 6000
    """Characters of each branch's transcript."""
    asker: JudgeAsker[tuple[float, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.asker = JudgeAsker(self.model, self.attempts, self.max_concurrent)

    def messages(self, trajectories: Sequence[Trajectory]) -> list[Message]:
        """What the judge model is asked about these branches."""
        parts = [f"RUBRIC:\n{self.rubric}"]
        for i, trajectory in enumerate(trajectories, start=1):
            text = transcript(
                trajectory, message_chars=self.message_chars, total_chars=self.total_chars
            )
            parts.append(f"=== TRAJECTORY {i} ===\n{text}")
        parts.append(
            f"Score all {len(trajectories)} trajectories. End with one line "
            "'TRAJECTORY i: SCORE x' per trajectory."
        )
        return [
            Message(role="system", content=RANKING_SYSTEM),
            Message(role="user", content="\n\n".join(parts)),
        ]

    async def score_group(self, trajectories: Sequence[Trajectory]) -> Sequence[RewardOutcome]:
        """One outcome per branch, from one (retried) judgement of the group."""
        judged = [i for i, t in enumerate(trajectories) if t.turns and not t.stop_reason.is_error]
        outcomes = [RewardOutcome(0.0) for _ in trajectories]
        if not judged:
            return outcomes
        shown = [trajectories[i] for i in judged]
        answer = await self.asker.ask(self.messages(shown), lambda r: parse_ranking(r, len(shown)))
        for k, i in enumerate(judged):
            if isinstance(answer, str):
                outcomes[i] = RewardOutcome(None, error=answer)
            else:
                scores, reply = answer
                outcomes[i] = RewardOutcome(
                    scores[k], detail=f"TRAJECTORY {k + 1} of {len(shown)}.\n{reply}"
                )
        return outcomes

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """The judged reward on the last turn."""
        return last_turn_rewards(trajectory)
