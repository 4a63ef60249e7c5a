"""BM25 retrieval over the generated corpus: the named entity's document comes first; the
tool message's sizes; one index per corpus; the missing-extra error."""

from __future__ import annotations

import sys

import pytest

from agentrl._optional import MissingExtraError
from agentrl.envs.search import Bm25Index, Document, corpus_index, generated_data, tokenize
from agentrl.envs.search.env import SearchOptions, format_hits


def test_tokens_are_lower_case_words_without_stop_words() -> None:
    words = ["who", "founded", "quorvex", "labs", "1987"]
    assert tokenize("Who founded the Quorvex-Labs in 1987?") == words


def test_the_named_entity_document_is_the_first_hit() -> None:
    data = generated_data(0)
    index = corpus_index(data.corpus)
    titles = {d.id: d.title for d in data.corpus.documents}
    first = total = 0
    for question in data.split("valid_unseen"):
        for doc in question.support:
            hits = index.search(titles[doc], k=3)
            assert doc in [h.document.id for h in hits], titles[doc]
            first += hits[0].document.id == doc
            total += 1
    assert first == total
    hits = index.search("Who founded " + titles[data.split("valid_unseen")[0].support[0]], k=5)
    assert len(hits) == 5 and hits[0].score >= hits[-1].score > 0


def test_small_index_ranks_ties_and_misses() -> None:
    docs = [
        Document("a", "Vellmora", "Vellmora is a city in Quorvia."),
        Document("b", "Quorvia", "Quorvia is a country. The capital of Quorvia is Vellmora."),
        Document("c", "Drabek", "Drabek is a person."),
    ]
    index = Bm25Index(docs)
    assert [h.document.id for h in index.search("capital of Quorvia", k=3)] == ["b", "a"]
    assert index.search("the of and") == [] and index.search("zebra") == []
    assert [h.document.id for h in index.search("drabek", k=10)] == ["c"]  # k above the size


def test_the_index_is_built_once_per_corpus() -> None:
    data = generated_data(0)
    assert corpus_index(data.corpus) is corpus_index(generated_data(0).corpus)


def test_result_messages_are_capped() -> None:
    options = SearchOptions(doc_chars=20, output_chars=90)
    text = format_hits("q  x", [("T1", "word " * 50), ("T2", "b"), ("T3", "c")], options)
    assert text.startswith('Search results for "q x":\nResult 1: T1\nword word')
    assert "word ..." in text and len(text) <= 90 + len("\n[results cut]")
    assert text.endswith("[results cut]")
    assert "No documents match" in format_hits("q", [], SearchOptions())


def test_without_bm25s_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bm25s", None)  # what an absent package looks like
    with pytest.raises(MissingExtraError, match=r"pip install 'agentrl\[search\]'"):
        Bm25Index([Document("a", "A", "text")])
