"""A Search-R1 style environment: answer multi-hop questions by searching a BM25-indexed corpus.

`generated_data(seed)` gives a generated world (fictional entities, one document each, 1- and
2-hop questions in disjoint splits), `folder_data(dir)` a user's own `corpus.jsonl` and
`<split>.jsonl`; `corpus_index(corpus)` the BM25 index (`bm25s`, the `search` extra);
`search_tool_protocol()` the `search(query)` / `answer(text)` tools; `SearchFactory` the
`EnvGroupFactory`; `exact_match` / `f1_score` the answer metrics; `solver_player` and
`nosearch_player` the scripted baselines. See docs/search.md.
"""

from agentrl.envs.search.data import (
    Corpus,
    Document,
    Question,
    SearchDataError,
    read_corpus,
    read_questions,
)
from agentrl.envs.search.env import (
    SYSTEM_PROMPT,
    SearchEnv,
    SearchFactory,
    SearchOptions,
    search_tool_protocol,
)
from agentrl.envs.search.index import Bm25Index, Hit, corpus_index, tokenize
from agentrl.envs.search.scoring import (
    AnswerMetric,
    SearchReward,
    exact_match,
    f1_score,
    normalize_answer,
)
from agentrl.envs.search.solver import nosearch_player, solver_player
from agentrl.envs.search.tasks import (
    SEARCH_SPLITS,
    SearchData,
    folder_data,
    generated_data,
    write_data,
)
from agentrl.envs.search.world import PoolSize, World, generate_world

__all__ = [
    "SEARCH_SPLITS",
    "SYSTEM_PROMPT",
    "AnswerMetric",
    "Bm25Index",
    "Corpus",
    "Document",
    "Hit",
    "PoolSize",
    "Question",
    "SearchData",
    "SearchDataError",
    "SearchEnv",
    "SearchFactory",
    "SearchOptions",
    "SearchReward",
    "World",
    "corpus_index",
    "exact_match",
    "f1_score",
    "folder_data",
    "generate_world",
    "generated_data",
    "normalize_answer",
    "nosearch_player",
    "read_corpus",
    "read_questions",
    "search_tool_protocol",
    "solver_player",
    "tokenize",
    "write_data",
]
