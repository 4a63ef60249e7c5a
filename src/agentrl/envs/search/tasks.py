"""Where the search environment's corpus and questions come from: the generated world, or a
folder of JSONL files (`corpus.jsonl` and `<split>.jsonl`, what `write_data` writes).

Generated splits (world seed 0 unless told): `valid_seen` the first `SEEN_VALID` questions of
the seen pool, `train` the rest of that pool (so no train question is a valid_seen question,
but they ask about the same entities), `valid_unseen` the first `UNSEEN_VALID` questions of the
unseen pool (entities no train question names). Task ids are `search/<split>/<n>`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentrl.core.types import TaskInfo
from agentrl.envs.search.data import (
    Corpus,
    Question,
    SearchDataError,
    read_corpus,
    read_questions,
    write_jsonl,
)
from agentrl.envs.search.world import generate_world

__all__ = [
    "CORPUS_FILE",
    "SEARCH_SPLITS",
    "SEEN_VALID",
    "UNSEEN_VALID",
    "SearchData",
    "folder_data",
    "generated_data",
    "write_data",
]

SEARCH_SPLITS = ("train", "valid_seen", "valid_unseen")
CORPUS_FILE = "corpus.jsonl"
"""The corpus's file name in a data folder (next to `<split>.jsonl`)."""
SEEN_VALID = 100
"""valid_seen questions of a generated world (held out of the seen pool's train questions)."""
UNSEEN_VALID = 100
"""valid_unseen questions of a generated world."""


@dataclass(frozen=True)
class SearchData:
    """A corpus and its questions per split."""

    corpus: Corpus
    questions: Mapping[str, tuple[Question, ...]] = field(compare=False)
    """Questions by split (a split may be missing: a folder without its file)."""
    source: str = "generated"
    """Where they come from, for error messages (the folder, or `generated`)."""

    def split(self, split: str) -> tuple[Question, ...]:
        """The questions of `split` (SearchDataError naming the missing file)."""
        if split not in SEARCH_SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {list(SEARCH_SPLITS)}")
        if split not in self.questions:
            raise SearchDataError(
                f"{Path(self.source) / f'{split}.jsonl'}: no question file for split {split!r}"
            )
        return self.questions[split]

    def tasks(self, split: str, count: int | None = None) -> list[TaskInfo]:
        """The first `count` questions of `split` as tasks (all when None)."""
        questions = self.split(split)[:count]
        return [
            TaskInfo(f"search/{split}/{i}", q.type, q.question, split)
            for i, q in enumerate(questions)
        ]

    def by_task_id(self) -> dict[str, Question]:
        """Every question by its task id."""
        return {
            f"search/{split}/{i}": q
            for split, questions in self.questions.items()
            for i, q in enumerate(questions)
        }


@functools.cache
def generated_data(seed: int = 0) -> SearchData:
    """The generated world `seed` as splits (cached per process)."""
    world = generate_world(seed)
    seen, unseen = world.questions["seen"], world.questions["unseen"]
    questions = {
        "train": seen[SEEN_VALID:],
        "valid_seen": seen[:SEEN_VALID],
        "valid_unseen": unseen[:UNSEEN_VALID],
    }
    return SearchData(Corpus(f"generated:seed={seed}", world.documents), questions)


def folder_data(folder: Path) -> SearchData:
    """The corpus and question files of a data folder (re-read only when a file changes)."""
    folder = Path(folder).expanduser()
    stamps = []
    for name in (CORPUS_FILE, *(f"{s}.jsonl" for s in SEARCH_SPLITS)):
        path = folder / name
        stat = path.stat() if path.is_file() else None
        stamps.append((name, (stat.st_mtime_ns, stat.st_size) if stat else None))
    return _folder_data(folder.resolve(), tuple(stamps))


@functools.lru_cache(maxsize=8)
def _folder_data(
    folder: Path, stamps: tuple[tuple[str, tuple[int, int] | None], ...]
) -> SearchData:
    if not (folder / CORPUS_FILE).is_file():
        raise SearchDataError(
            f"{folder / CORPUS_FILE}: no such corpus file (a search data folder holds "
            "corpus.jsonl and <split>.jsonl; `agentrl generate --env search --out DIR` writes one)"
        )
    corpus = read_corpus(folder / CORPUS_FILE)
    questions = {
        split: read_questions(folder / f"{split}.jsonl")
        for split in SEARCH_SPLITS
        if (folder / f"{split}.jsonl").is_file()
    }
    return SearchData(corpus, questions, str(folder))


def write_data(data: SearchData, out: Path, counts: Mapping[str, int | None]) -> list[Path]:
    """Write `corpus.jsonl` and `<split>.jsonl` for each split of `counts` (None: all)."""
    out = Path(out)
    docs = ({"id": d.id, "title": d.title, "text": d.text} for d in data.corpus.documents)
    written = [write_jsonl(out / CORPUS_FILE, docs)]
    for split, count in counts.items():
        questions: Sequence[Question] = data.split(split)[:count]
        records = (
            {
                "id": q.id,
                "question": q.question,
                "answers": list(q.answers),
                "type": q.type,
                "support": list(q.support),
            }
            for q in questions
        )
        written.append(write_jsonl(out / f"{split}.jsonl", records))
    return written
