"""The BM25 index of a corpus (`bm25s`, numpy backend, imported lazily).

Text is lower-cased, split into word tokens (`\\w+`) and stripped of English stop words (bm25s's
list); a document is indexed as its title followed by its text. The vocabulary is built in
first-seen order, so an index (and its ties) is the same in every process. `corpus_index`
builds one index per corpus per process and reuses it (keyed by `Corpus.key`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl._optional import require
from agentrl.envs.search.data import Corpus, Document

__all__ = ["Bm25Index", "Hit", "corpus_index", "tokenize"]

_WORD = re.compile(r"\w+")


@functools.cache
def _stopwords() -> frozenset[str]:
    stopwords = require("bm25s.stopwords", "search", "the search environment's BM25 index")
    return frozenset(stopwords.STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    """The index's tokens of `text`: lower-case words, English stop words removed."""
    stop = _stopwords()
    return [word for word in _WORD.findall(text.lower()) if word not in stop]


@dataclass(frozen=True)
class Hit:
    """One retrieved document and its BM25 score."""

    document: Document
    score: float


class Bm25Index:
    """A BM25 (Lucene variant, k1=1.5, b=0.75) index over a corpus's documents."""

    def __init__(self, documents: Sequence[Document], *, k1: float = 1.5, b: float = 0.75) -> None:
        bm25s = require("bm25s", "search", "the search environment's BM25 index")
        if not documents:
            raise ValueError("cannot index an empty corpus")
        self.documents = tuple(documents)
        self.vocab: dict[str, int] = {}
        ids = [self._ids(f"{d.title}\n{d.text}", grow=True) for d in self.documents]
        self._retriever: Any = bm25s.BM25(k1=k1, b=b)
        self._retriever.index((ids, dict(self.vocab)), show_progress=False)

    def _ids(self, text: str, *, grow: bool) -> list[int]:
        ids = []
        for token in tokenize(text):
            index = self.vocab.get(token)
            if index is None and grow:
                index = self.vocab[token] = len(self.vocab)
            if index is not None:
                ids.append(index)
        return ids

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """The best `k` documents for `query` (best first), leaving out those that share no
        word with it; empty when no query word is in the corpus."""
        ids = self._ids(query, grow=False)
        if not ids or k < 1:
            return []
        k = min(k, len(self.documents))
        found = self._retriever.retrieve([ids], k=k, show_progress=False, n_threads=0)
        hits = []
        for index, score in zip(found.documents[0], found.scores[0], strict=True):
            if float(score) > 0.0:
                hits.append(Hit(self.documents[int(index)], float(score)))
        return hits


@functools.lru_cache(maxsize=4)
def corpus_index(corpus: Corpus) -> Bm25Index:
    """The index of `corpus`, built once per process for each corpus key."""
    return Bm25Index(corpus.documents)
