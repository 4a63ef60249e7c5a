"""The language of the generated search corpus: relations, how documents state them and how
questions ask about them. The generator writes documents and questions with it; the solver
baseline reads questions and search results with the same patterns (it knows the language, not
the facts). Pure: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "KINDS",
    "QUESTION_TEMPLATES",
    "RELATIONS",
    "QuestionTemplate",
    "Relation",
    "match_question",
    "read_relation",
]

KINDS = ("country", "city", "university", "person", "company", "invention")
"""The entity kinds of a generated world."""


@dataclass(frozen=True)
class Relation:
    """A fact type: subject kind, object kind and the sentences that state it."""

    name: str
    subject: str
    """The subject's kind (one of `KINDS`)."""
    object: str
    """The object's kind (one of `KINDS`, or `year` / `text` for literal values)."""
    phrasings: tuple[str, ...]
    """Sentences with `{s}` (the subject) and `{o}` (the object, always last before `.`)."""


RELATIONS: Mapping[str, Relation] = MappingProxyType(
    {
        r.name: r
        for r in (
            Relation(
                "located_in", "city", "country", ("{s} is a city in {o}.", "{s} lies in {o}.")
            ),
            Relation("capital", "country", "city", ("The capital of {s} is {o}.",)),
            Relation("population", "city", "text", ("{s} has a population of about {o}.",)),
            Relation(
                "campus",
                "university",
                "city",
                ("{s} is located in {o}.", "{s} has its campus in {o}."),
            ),
            Relation("established", "university", "year", ("{s} opened its doors in {o}.",)),
            Relation(
                "born_in", "person", "city", ("{s} was born in {o}.", "{s} is a native of {o}.")
            ),
            Relation(
                "birth_year",
                "person",
                "year",
                ("The birth year of {s} is {o}.", "{s} entered life in {o}."),
            ),
            Relation(
                "educated_at",
                "person",
                "university",
                ("{s} studied at {o}.", "{s} graduated from {o}."),
            ),
            Relation("occupation", "person", "text", ("{s} works as {o}.",)),
            Relation(
                "founder",
                "company",
                "person",
                ("{s} was founded by {o}.", "The founder of {s} is {o}."),
            ),
            Relation(
                "headquarters",
                "company",
                "city",
                ("{s} is headquartered in {o}.", "The head office of {s} is in {o}."),
            ),
            Relation("founded_year", "company", "year", ("{s} was set up in {o}.",)),
            Relation("industry", "company", "text", ("{s} makes {o}.",)),
            Relation(
                "inventor",
                "invention",
                "person",
                ("{s} was invented by {o}.", "The inventor of {s} is {o}."),
            ),
            Relation(
                "producer",
                "invention",
                "company",
                ("{s} was first manufactured by {o}.", "The first maker of {s} was {o}."),
            ),
            Relation("invented_year", "invention", "year", ("{s} dates from {o}.",)),
            Relation("description", "invention", "text", ("{s} is {o}.",)),
        )
    }
)
"""Every relation by name."""


@dataclass(frozen=True)
class QuestionTemplate:
    """A question type: whom it asks about and the chain of relations to the answer."""

    name: str
    subject: str
    """The kind of entity the question names."""
    chain: tuple[str, ...]
    """Relation names followed from the subject to the answer (one per hop)."""
    phrasings: tuple[str, ...]
    """Question texts with `{s}`."""

    @property
    def hops(self) -> int:
        """Documents needed to answer (searches a solver makes)."""
        return len(self.chain)


QUESTION_TEMPLATES: Mapping[str, QuestionTemplate] = MappingProxyType(
    {
        t.name: t
        for t in (
            QuestionTemplate("founder", "company", ("founder",), ("Who founded {s}?",)),
            QuestionTemplate("inventor", "invention", ("inventor",), ("Who invented the {s}?",)),
            QuestionTemplate(
                "birthplace",
                "person",
                ("born_in",),
                ("In which city was {s} born?", "Where was {s} born?"),
            ),
            QuestionTemplate(
                "founder_birthplace",
                "company",
                ("founder", "born_in"),
                (
                    "In which city was the founder of {s} born?",
                    "Where was the person who founded {s} born?",
                ),
            ),
            QuestionTemplate(
                "founder_university",
                "company",
                ("founder", "educated_at"),
                ("Which university did the founder of {s} attend?",),
            ),
            QuestionTemplate(
                "founder_birth_year",
                "company",
                ("founder", "birth_year"),
                ("In what year was the founder of {s} born?",),
            ),
            QuestionTemplate(
                "headquarters_country",
                "company",
                ("headquarters", "located_in"),
                ("In which country is {s} headquartered?",),
            ),
            QuestionTemplate(
                "inventor_birthplace",
                "invention",
                ("inventor", "born_in"),
                ("In which city was the inventor of the {s} born?",),
            ),
            QuestionTemplate(
                "maker_founder",
                "invention",
                ("producer", "founder"),
                ("Who founded the company that first manufactured the {s}?",),
            ),
            QuestionTemplate(
                "maker_headquarters",
                "invention",
                ("producer", "headquarters"),
                ("In which city is the company that first manufactured the {s} headquartered?",),
            ),
            QuestionTemplate(
                "maker_founded_year",
                "invention",
                ("producer", "founded_year"),
                ("In what year was the company that first manufactured the {s} set up?",),
            ),
            QuestionTemplate(
                "birth_country",
                "person",
                ("born_in", "located_in"),
                ("In which country was {s} born?",),
            ),
            QuestionTemplate(
                "university_city",
                "person",
                ("educated_at", "campus"),
                ("In which city is the university that {s} attended?",),
            ),
        )
    }
)
"""Every question template by name (1-hop and 2-hop)."""


def _pattern(phrasing: str, capture: str) -> re.Pattern[str]:
    before, after = phrasing.split("{s}")
    return re.compile(f"^{re.escape(before)}{capture}{re.escape(after)}$")


_QUESTION_PATTERNS = tuple(
    (t, _pattern(p, "(?P<s>.+)")) for t in QUESTION_TEMPLATES.values() for p in t.phrasings
)


def match_question(text: str) -> tuple[QuestionTemplate, str] | None:
    """The template and subject of a generated question (the most specific reading), or None."""
    found = []
    for template, pattern in _QUESTION_PATTERNS:
        match = pattern.match(text.strip())
        if match:
            found.append((len(match.group("s")), template.name, template, match.group("s")))
    if not found:
        return None
    _, _, template, subject = min(found)
    return template, subject


def read_relation(relation: str, subject: str, text: str) -> str | None:
    """The object a document's `text` states for `subject` under `relation`, or None."""
    for phrasing in RELATIONS[relation].phrasings:
        before, after = phrasing.split("{o}")
        head = re.escape(before.replace("{s}", subject))
        match = re.search(f"(?:^|(?<=[.] )){head}([^.]+?){re.escape(after)}", text)
        if match:
            return match.group(1).strip()
    return None
