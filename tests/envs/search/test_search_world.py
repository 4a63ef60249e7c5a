"""The generated world: deterministic from the seed (in any process), disjoint splits, every
question answerable from its support documents."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

from agentrl.envs.search import generate_world, generated_data
from agentrl.envs.search.language import QUESTION_TEMPLATES, match_question, read_relation
from agentrl.envs.search.world import SEEN_POOL, UNSEEN_POOL, PoolSize

DIGEST = (
    "import hashlib, json, sys\n"
    "from agentrl.envs.search.spec import SPEC\n"
    "from agentrl.envs.search import generated_data\n"
    "data = generated_data(0)\n"
    "items = [[d.id, d.title, d.text] for d in data.corpus.documents]\n"
    "items += [[s, q.question, *q.answers] for s, qs in data.questions.items() for q in qs]\n"
    "print(hashlib.sha256(json.dumps(items).encode()).hexdigest())\n"
    "print('bm25s' in sys.modules)\n"
)


GOLDEN = "af00f7ad5b0b3961"
"""The first hex digits of world 0's digest: a change to the generator changes them."""


def _digest() -> str:
    data = generated_data(0)
    items = [[d.id, d.title, d.text] for d in data.corpus.documents]
    items += [[s, q.question, *q.answers] for s, qs in data.questions.items() for q in qs]
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def test_generation_is_deterministic_fast_and_independent_of_the_process() -> None:
    start = time.perf_counter()
    world = generate_world(0)
    assert time.perf_counter() - start < 3.0
    assert world == generate_world(0)
    assert world.documents != generate_world(1).documents
    assert len(world.documents) == SEEN_POOL.documents + UNSEEN_POOL.documents == 662
    other = subprocess.run(
        [sys.executable, "-c", DIGEST],
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    digest, imported = other.stdout.split()
    assert digest == _digest()  # string hashing does not leak into the world
    assert digest.startswith(GOLDEN)  # nor the machine or Python version (change on purpose)
    assert imported == "False"  # bm25s is imported only when an index is built


def test_splits_are_disjoint_and_unseen_entities_never_appear_in_train() -> None:
    data = generated_data(0)
    train, seen, unseen = (data.split(s) for s in ("train", "valid_seen", "valid_unseen"))
    assert (len(train), len(seen), len(unseen)) == (1500, 100, 100)
    assert not {q.question for q in train} & {q.question for q in seen}
    titles = {d.id: d.title for d in data.corpus.documents}
    train_text = " ".join(q.question + " " + " ".join(q.answers) for q in train)
    train_docs = {doc for q in train for doc in q.support}
    for question in unseen:
        assert not set(question.support) & train_docs
        for doc in question.support:
            assert titles[doc] not in train_text, titles[doc]
        if not question.answers[0].isdigit():  # years may repeat
            assert question.answers[0] not in train_text
    seen_docs = {doc for q in seen for doc in q.support}
    assert len(seen_docs & train_docs) > 50  # valid_seen asks about entities train knows
    assert {q.type for q in unseen} == set(QUESTION_TEMPLATES)


def test_every_question_is_answerable_from_its_support_documents() -> None:
    data = generated_data(0)
    by_id = {d.id: d for d in data.corpus.documents}
    two_hops = 0
    for split in ("train", "valid_unseen"):
        for question in data.split(split):
            parsed = match_question(question.question)
            assert parsed is not None and parsed[0].name == question.type
            template, entity = parsed
            assert len(question.support) == template.hops
            for relation, doc in zip(template.chain, question.support, strict=True):
                assert by_id[doc].title == entity
                found = read_relation(relation, entity, by_id[doc].text)
                assert found is not None
                entity = found
            assert entity == question.answers[0]
            two_hops += template.hops == 2
    assert two_hops > 1000


def test_pool_sizes_scale() -> None:
    small = PoolSize(2, 4, 2, 8, 4, 4)
    world = generate_world(3, small, small.scaled(0.5))
    assert len(world.documents) == small.documents + small.scaled(0.5).documents
    assert len({d.title for d in world.documents}) == len(world.documents)
    assert all(len(world.questions[p]) > 0 for p in ("seen", "unseen"))
