"""Answer scoring of the search environment: SQuAD / Search-R1 normalisation, exact match and
token F1 against a question's gold answers, and the episode reward.

`normalize_answer` lower-cases, drops punctuation and the articles a / an / the, and collapses
whitespace (the SQuAD evaluation script's order). Both metrics take the best gold answer.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from agentrl.core.types import Trajectory

__all__ = ["AnswerMetric", "SearchReward", "exact_match", "f1_score", "normalize_answer", "score"]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


class AnswerMetric(StrEnum):
    """What an answer's score (and the reward) is."""

    EM = "em"
    """Exact match after normalisation: 1 or 0 (the default; `won` is always this)."""
    F1 = "f1"
    """Token F1 after normalisation, in [0, 1]."""


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (SQuAD's `normalize_answer`)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """Whether the normalised prediction equals a normalised gold answer."""
    given = normalize_answer(prediction)
    return any(given == normalize_answer(answer) for answer in answers)


def _f1(prediction: str, answer: str) -> float:
    given, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    if not given or not gold:
        return float(given == gold)
    common = sum((Counter(given) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(given), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 of the normalised prediction against the gold answers."""
    return max((_f1(prediction, answer) for answer in answers), default=0.0)


def score(prediction: str, answers: Sequence[str], metric: AnswerMetric) -> float:
    """The prediction's score under `metric`."""
    if metric is AnswerMetric.F1:
        return f1_score(prediction, answers)
    return 1.0 if exact_match(prediction, answers) else 0.0


@dataclass(frozen=True)
class SearchReward:
    """`win_reward * score - invalid_penalty * invalid turns`, where score is the answer's
    metric as the env reported it (EM: `1[won]`, i.e. the recipe's `win_minus_invalid`; F1:
    partial credit); no answer scores 0."""

    win_reward: float = 1.0
    invalid_penalty: float = 0.1

    def __call__(self, trajectory: Trajectory) -> float:
        """The trajectory's reward."""
        return sum(self.turn_rewards(trajectory))

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """Invalid-turn penalties on their turns, the answer's score on the last turn."""
        rewards = [-self.invalid_penalty if turn.invalid else 0.0 for turn in trajectory.turns]
        steps = [t.env_step for t in trajectory.turns if t.env_step is not None]
        if rewards and steps and steps[-1].done:
            rewards[-1] += self.win_reward * steps[-1].score
        return tuple(rewards)
