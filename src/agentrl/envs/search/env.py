"""The search environment: `search(query)` over a BM25 index and `answer(text)`, Search-R1 style.

Each branch answers one question. `search` returns the top-k documents (title and text, each
text cut to `doc_chars`, the whole message to `output_chars`); `answer` ends the episode, won
on an exact match after normalisation (`scoring`). The step's score is the answer's metric
(EM, or token F1 with `metric=f1`), which `SearchReward` pays.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from agentrl.core.types import TaskInfo
from agentrl.envs.search.data import Question
from agentrl.envs.search.index import Bm25Index
from agentrl.envs.search.scoring import AnswerMetric, exact_match, f1_score
from agentrl.tools import FunctionEnv, FunctionEnvGroup, FunctionTools, tool

__all__ = [
    "RESULT_HEADER",
    "SYSTEM_PROMPT",
    "SearchEnv",
    "SearchFactory",
    "SearchOptions",
    "format_hits",
    "search_tool_protocol",
]

SYSTEM_PROMPT = (
    "You answer questions about a collection of documents. You do not know these facts "
    "yourself: find them by searching.\n"
    "Tools:\n"
    "- search(query): returns the best-matching documents (title and text) for a keyword "
    "query, such as a name. A question may need several searches: look up one fact, then "
    "search for what it names.\n"
    "- answer(text): gives your final answer and ends the episode. Answer with the exact name, "
    "place or number only, not a sentence.\n"
    "Make exactly one tool call per turn."
)

RESULT_HEADER = 'Search results for "{query}":'
"""The first line of a search's tool message."""


@dataclass(frozen=True)
class SearchOptions:
    """Retrieval sizes, the search budget and the answer metric."""

    top_k: int = 3
    """Documents one search returns."""
    doc_chars: int = 600
    """Characters of a document's text a result keeps."""
    output_chars: int = 2500
    """Characters one search's tool message keeps in all."""
    max_searches: int = 8
    """Searches one episode may make; later ones are refused (the model should answer)."""
    metric: AnswerMetric = AnswerMetric.EM
    """The step score the reward pays: exact match (1/0) or token F1."""

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.doc_chars < 1 or self.output_chars < 1 or self.max_searches < 0:
            raise ValueError(f"SearchOptions needs positive sizes, got {self}")


def format_hits(query: str, hits: list[tuple[str, str]], options: SearchOptions) -> str:
    """The tool message of a search: a header line, then `Result N: <title>` and the text of
    each hit, cut to the option's sizes."""
    lines = [RESULT_HEADER.format(query=" ".join(query.split()))]
    if not hits:
        lines.append("No documents match this query; try other words.")
    for number, (title, text) in enumerate(hits, start=1):
        text = " ".join(text.split())
        if len(text) > options.doc_chars:
            text = text[: options.doc_chars].rstrip() + " ..."
        lines.append(f"Result {number}: {title}\n{text}")
    out = "\n".join(lines)
    if len(out) > options.output_chars:
        out = out[: options.output_chars].rstrip() + "\n[results cut]"
    return out


class SearchEnv(FunctionEnv):
    """One branch: a question, the shared index and the two tools."""

    def __init__(
        self, task: TaskInfo, question: Question, index: Bm25Index, options: SearchOptions
    ) -> None:
        self.task, self.question, self.index, self.options = task, question, index, options
        self.history: list[str] = []
        self.searches = 0
        self.answered: str | None = None
        self.f1 = 0.0

    def observation(self) -> str:
        """The question."""
        return f"Question: {self.question.question}"

    def state_key(self) -> str:
        """A hash of the task and every call so far (equal histories, equal keys)."""
        digest = hashlib.sha256(self.task.task_id.encode())
        for item in self.history:
            digest.update(b"\0" + item.encode())
        return digest.hexdigest()[:16]

    @tool
    async def search(self, query: str) -> str:
        """Search the documents and return the best matches (title and text).

        Args:
            query: Keywords to look for, such as a name.
        """
        self.history.append(f"search:{query}")
        if self.searches >= self.options.max_searches:
            return (
                f"Search limit reached ({self.options.max_searches} searches); "
                "call answer with your best answer."
            )
        self.searches += 1
        found = await asyncio.to_thread(self.index.search, query, self.options.top_k)
        return format_hits(
            query, [(h.document.title, h.document.text) for h in found], self.options
        )

    @tool
    def answer(self, text: str) -> str:
        """Give the final answer and end the episode.

        Args:
            text: The answer only (a name, a place or a number), not a sentence.
        """
        self.history.append(f"answer:{text}")
        self.answered = text
        self.done = True
        self.won = exact_match(text, self.question.answers)
        self.f1 = f1_score(text, self.question.answers)
        self.score = self.f1 if self.options.metric is AnswerMetric.F1 else float(self.won)
        return f"Answer recorded: {'correct' if self.won else 'incorrect'} (F1 {self.f1:.2f})."


def search_tool_protocol(max_calls: int = 1) -> FunctionTools:
    """The environment's `FunctionTools` protocol (`max_calls` calls per turn)."""
    return SearchEnv.protocol(SYSTEM_PROMPT, max_calls=max_calls)


@dataclass(frozen=True)
class SearchFactory:
    """An `EnvGroupFactory` of search groups: questions by task id over one shared index."""

    questions: Mapping[str, Question]
    """Every playable question by task id (`search/<split>/<n>`)."""
    index: Bm25Index
    options: SearchOptions = SearchOptions()

    def question_for(self, task: TaskInfo) -> Question:
        """The question a task names (ValueError when this factory's data has none)."""
        question = self.questions.get(task.task_id)
        if question is None:
            raise ValueError(
                f"no search question {task.task_id!r} in this corpus's question files "
                "(ids are search/<split>/<line index>)"
            )
        return question

    def __call__(self, task: TaskInfo, group_size: int) -> FunctionEnvGroup:
        """K branches of the task's question."""
        question = self.question_for(task)
        return FunctionEnvGroup(
            task, group_size, lambda t: SearchEnv(t, question, self.index, self.options)
        )
