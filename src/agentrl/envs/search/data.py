"""Records and files of the search environment: documents, questions, and their JSONL files.

A corpus file holds one document per line, `{"id", "title", "text"}`; a question file one
question per line, `{"question", "answers": [...]}` (optional `id`, `type`; other keys are
ignored). A bad line raises `SearchDataError` naming the file, the line number and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "Corpus",
    "Document",
    "Question",
    "SearchDataError",
    "read_corpus",
    "read_questions",
    "write_jsonl",
]


class SearchDataError(ValueError):
    """A corpus or question file cannot be used (the text names the file, line and field)."""


@dataclass(frozen=True)
class Document:
    """One searchable document."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    """One question and the answers that count as correct."""

    id: str
    question: str
    answers: tuple[str, ...]
    type: str = "custom"
    """The question's template (`founder_birthplace`, ...), or `custom` for a user's."""
    support: tuple[str, ...] = ()
    """Ids of the documents that state the facts needed (generated questions)."""


@dataclass(frozen=True)
class Corpus:
    """The documents of one index; equal keys mean equal contents (the index cache's key)."""

    key: str
    """Where the documents come from: `generated:seed=0` or a file's path, size and mtime."""
    documents: tuple[Document, ...] = field(compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.documents)


class _DocumentLine(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    id: str = Field(min_length=1)
    title: str
    text: str


class _QuestionLine(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    id: str | None = Field(None, min_length=1)
    question: str = Field(min_length=1)
    answers: list[str] = Field(min_length=1)
    type: str = Field("custom", min_length=1)
    support: list[str] = []


def _lines(path: Path, what: str) -> Iterable[tuple[int, Mapping[str, object]]]:
    """(line number, JSON object) of each non-blank line; bad JSON raises with the line."""
    if not path.is_file():
        raise SearchDataError(f"{path}: no such {what} file")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SearchDataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(value, dict):
                raise SearchDataError(f"{path}:{number}: expected a JSON object, got {line[:40]!r}")
            yield number, value


def _field_error(path: Path, number: int, error: ValidationError) -> SearchDataError:
    item = error.errors(include_url=False)[0]
    where = ".".join(str(p) for p in item["loc"]) or "line"
    return SearchDataError(f"{path}:{number}: field {where!r}: {item['msg']}")


def read_corpus(path: Path) -> Corpus:
    """The documents of a corpus JSONL file (`{"id", "title", "text"}` per line)."""
    path = Path(path)
    documents: list[Document] = []
    first_line: dict[str, int] = {}
    for number, value in _lines(path, "corpus"):
        try:
            line = _DocumentLine.model_validate(value)
        except ValidationError as exc:
            raise _field_error(path, number, exc) from None
        if line.id in first_line:
            raise SearchDataError(
                f"{path}:{number}: field 'id': duplicate id {line.id!r} "
                f"(first on line {first_line[line.id]})"
            )
        first_line[line.id] = number
        documents.append(Document(line.id, line.title, line.text))
    if not documents:
        raise SearchDataError(f"{path}: the corpus has no documents")
    stat = path.stat()
    return Corpus(f"file:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}", tuple(documents))


def read_questions(path: Path) -> tuple[Question, ...]:
    """The questions of a JSONL file (`{"question", "answers": [...]}` per line)."""
    path = Path(path)
    questions: list[Question] = []
    for number, value in _lines(path, "question"):
        try:
            line = _QuestionLine.model_validate(value)
        except ValidationError as exc:
            raise _field_error(path, number, exc) from None
        if not all(answer.strip() for answer in line.answers):
            raise SearchDataError(f"{path}:{number}: field 'answers': an answer is empty")
        qid = line.id or str(len(questions))
        questions.append(
            Question(qid, line.question, tuple(line.answers), line.type, tuple(line.support))
        )
    if not questions:
        raise SearchDataError(f"{path}: the file has no questions")
    return tuple(questions)


def write_jsonl(path: Path, records: Iterable[Mapping[str, object]]) -> Path:
    """Write one JSON object per line (UTF-8) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
