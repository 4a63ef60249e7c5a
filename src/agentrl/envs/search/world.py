"""The generator of the search environment: fictional worlds, their documents and questions.

A world is a pool of invented entities (countries, cities, universities, people, companies,
inventions) with names no model can know, and facts linking them (`language.RELATIONS`). Each
entity gets one document stating its facts in varied phrasings; questions follow one or two
relations from a named entity (`language.QUESTION_TEMPLATES`: "In which city was the founder
of Quorvex Labs born?" needs the company's document, then the founder's).

Two disjoint pools share one corpus: `seen` (train and valid_seen questions; valid_seen holds
questions that train does not ask) and `unseen` (valid_unseen: entities train never asks
about). Every name's distinctive word is unique in the corpus. Everything is drawn from
`random.Random` seeded with strings, so a seed gives the same corpus on every machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentrl.envs.search.data import Document, Question
from agentrl.envs.search.language import QUESTION_TEMPLATES, RELATIONS

__all__ = ["SEEN_POOL", "UNSEEN_POOL", "Fact", "PoolSize", "World", "generate_world"]

# fmt: off
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "gr", "kr", "pr", "tr", "st", "th", "sh", "qu", "vr")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "m", "v", "k")
_CITY = ("mora", "holm", "grad", "ford", "vale", "port", "wick", "stad", "ria", "")
_COUNTRY = ("ia", "and", "ovia", "istan", "ora", "esh")
_COMPANY = ("Labs", "Systems", "Industries", "Dynamics", "Works", "Group", "Holdings", "Motors")
_UNIVERSITY = ("University of {w}", "{w} Institute of Technology", "{w} College")
_INVENTION = ("scope", "wheel", "loom", "lamp", "graph", "meter", "press", "drive")
_KINDS = ("a kind of loom", "an optical instrument", "a calculating machine", "a water pump",
          "a signal lamp", "a printing device", "a musical instrument", "a weather gauge")
_PRODUCTS = ("water pumps", "sailcloth", "clocks", "glassware", "bicycles", "radios", "dyes",
             "ceramic tiles", "telescopes", "typewriters")
_JOBS = ("an engineer", "a chemist", "a merchant", "a glassblower", "an architect",
         "a physician", "a cartographer", "a watchmaker", "a teacher", "a shipwright")
# fmt: on


@dataclass(frozen=True)
class PoolSize:
    """Entities of each kind in one pool."""

    countries: int
    cities: int
    universities: int
    people: int
    companies: int
    inventions: int

    @property
    def documents(self) -> int:
        """Documents the pool adds to the corpus (one per entity)."""
        return (
            self.countries + self.cities + self.universities + self.people + self.companies
        ) + self.inventions

    def scaled(self, factor: float) -> PoolSize:
        """Every count times `factor` (at least 1)."""
        counts = (
            self.countries,
            self.cities,
            self.universities,
            self.people,
            self.companies,
            self.inventions,
        )
        return PoolSize(*(max(1, round(n * factor)) for n in counts))


SEEN_POOL = PoolSize(
    countries=10, cities=60, universities=30, people=200, companies=100, inventions=100
)
"""The pool of train and valid_seen questions (500 documents)."""
UNSEEN_POOL = PoolSize(
    countries=6, cities=24, universities=12, people=60, companies=30, inventions=30
)
"""The pool of valid_unseen questions (162 documents)."""


@dataclass(frozen=True)
class Fact:
    """`subject relation object` (a relation of `language.RELATIONS`)."""

    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class World:
    """A generated corpus and its questions per pool."""

    seed: int
    documents: tuple[Document, ...]
    questions: Mapping[str, tuple[Question, ...]]
    """`seen` and `unseen`: every question the pool allows, shuffled (deterministic)."""
    facts: tuple[Fact, ...]


class _Names:
    """Invented names whose distinctive word is unique across the world."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: tuple[int, ...] = (2, 2, 3), suffix: str = "") -> str:
        while True:
            count = self.rng.choice(syllables)
            parts = [
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(count)
            ]
            word = ("".join(parts) + suffix).capitalize()
            if len(word) >= 5 and word.lower() not in self.used:
                self.used.add(word.lower())
                return word


class _Pool:
    """One pool's entities and facts."""

    def __init__(self, rng: random.Random, names: _Names, size: PoolSize) -> None:
        self.rng, self.facts = rng, list[Fact]()
        self.entities: dict[str, list[str]] = {}
        countries = self._make(
            "country", size.countries, lambda: names.word(suffix=rng.choice(_COUNTRY))
        )
        cities = self._make("city", size.cities, lambda: names.word(suffix=rng.choice(_CITY)))
        first_names = [names.word((2,)) for _ in range(max(8, size.people // 6))]
        for index, city in enumerate(cities):
            country = countries[index % len(countries)]
            self._fact(city, "located_in", country)
            if index < len(countries):
                self._fact(country, "capital", city)
            self._fact(city, "population", f"{rng.randrange(20, 2000) * 1000:,}")
        universities = self._make(
            "university", size.universities, lambda: rng.choice(_UNIVERSITY).format(w=names.word())
        )
        for university in universities:
            self._fact(university, "campus", rng.choice(cities))
            self._fact(university, "established", str(rng.randint(1600, 1950)))
        people = self._make(
            "person", size.people, lambda: f"{rng.choice(first_names)} {names.word()}"
        )
        for person in people:
            self._fact(person, "born_in", rng.choice(cities))
            self._fact(person, "birth_year", str(rng.randint(1820, 1990)))
            self._fact(person, "educated_at", rng.choice(universities))
            self._fact(person, "occupation", rng.choice(_JOBS))
        companies = self._make(
            "company", size.companies, lambda: f"{names.word()} {rng.choice(_COMPANY)}"
        )
        founders = rng.sample(people, len(companies)) if len(people) >= len(companies) else None
        for index, company in enumerate(companies):
            self._fact(company, "founder", founders[index] if founders else rng.choice(people))
            self._fact(company, "headquarters", rng.choice(cities))
            self._fact(company, "founded_year", str(rng.randint(1850, 2015)))
            self._fact(company, "industry", rng.choice(_PRODUCTS))
        inventions = self._make(
            "invention", size.inventions, lambda: names.word(suffix=rng.choice(_INVENTION))
        )
        for invention in inventions:
            self._fact(invention, "inventor", rng.choice(people))
            self._fact(invention, "producer", rng.choice(companies))
            self._fact(invention, "invented_year", str(rng.randint(1800, 2000)))
            self._fact(invention, "description", rng.choice(_KINDS))

    def _make(self, kind: str, count: int, name: Callable[[], str]) -> list[str]:
        made = [name() for _ in range(count)]
        self.entities[kind] = made
        return made

    def _fact(self, subject: str, relation: str, obj: str) -> None:
        self.facts.append(Fact(subject, relation, obj))


def _document_text(name: str, kind: str, facts: list[Fact], rng: random.Random) -> str:
    sentences = [
        rng.choice(RELATIONS[f.relation].phrasings).format(s=name, o=f.object) for f in facts
    ]
    rng.shuffle(sentences)
    intro = [] if kind == "invention" else [f"{name} is a {kind}."]
    return " ".join([*intro, *sentences])


def _questions(
    pool: _Pool, name: str, rng: random.Random, doc_ids: Mapping[str, str]
) -> tuple[Question, ...]:
    """Every question the pool allows (each template from each subject), shuffled."""
    lookup = {(f.subject, f.relation): f.object for f in pool.facts}
    questions: list[Question] = []
    for template in QUESTION_TEMPLATES.values():
        for subject in pool.entities[template.subject]:
            node, support = subject, []
            for relation in template.chain:
                support.append(doc_ids[node])
                node = lookup[(node, relation)]
            text = rng.choice(template.phrasings).format(s=subject)
            qid = f"{name}-{len(questions)}"
            questions.append(Question(qid, text, (node,), template.name, tuple(support)))
    rng.shuffle(questions)
    return tuple(questions)


def generate_world(
    seed: int = 0, seen: PoolSize = SEEN_POOL, unseen: PoolSize = UNSEEN_POOL
) -> World:
    """The corpus and questions of world `seed` (deterministic; well under a second)."""
    rng = random.Random(f"agentrl-search:{seed}")
    names = _Names(random.Random(f"agentrl-search:{seed}:names"))
    pools = {
        "seen": _Pool(random.Random(f"agentrl-search:{seed}:seen"), names, seen),
        "unseen": _Pool(random.Random(f"agentrl-search:{seed}:unseen"), names, unseen),
    }
    entries: list[tuple[str, str]] = []
    facts: list[Fact] = []
    for pool in pools.values():
        by_subject: dict[str, list[Fact]] = {}
        for fact in pool.facts:
            by_subject.setdefault(fact.subject, []).append(fact)
        for kind, members in pool.entities.items():
            for member in members:
                text = _document_text(member, kind, by_subject.get(member, []), rng)
                entries.append((member, text))
        facts.extend(pool.facts)
    rng.shuffle(entries)
    documents = tuple(Document(f"doc-{i:06d}", t, text) for i, (t, text) in enumerate(entries))
    doc_ids = {d.title: d.id for d in documents}
    questions = {
        name: _questions(pool, name, random.Random(f"agentrl-search:{seed}:{name}:q"), doc_ids)
        for name, pool in pools.items()
    }
    return World(seed, documents, questions, tuple(facts))
