"""A user's own corpus and questions: loading, and the error a bad line gives (file, line number
and field)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentrl.config import CommonConfig
from agentrl.envs.search import SearchDataError, folder_data, read_corpus, read_questions
from agentrl.envs.search.spec import SPEC, search_data

DOCS = [
    {"id": "d1", "title": "Vellmora", "text": "Vellmora is a city in Quorvia."},
    {"id": "d2", "title": "Quorvia", "text": "Quorvia is a country.", "url": "ignored"},
]


def _write(path: Path, lines: Sequence[object]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "d3", "title": "X"', r"corpus\.jsonl:3: not valid JSON"),
        ('["d3", "X", "text"]', r"corpus\.jsonl:3: expected a JSON object"),
        ({"id": "d3", "text": "no title"}, r"corpus\.jsonl:3: field 'title': Field required"),
        ({"id": "d3", "title": "X", "text": 7}, r"corpus\.jsonl:3: field 'text': .*valid string"),
        ({"id": "", "title": "X", "text": "t"}, r"corpus\.jsonl:3: field 'id': .*at least 1"),
        ({"id": "d1", "title": "X", "text": "t"}, r":3: field 'id': duplicate id 'd1' .*line 1"),
    ],
)
def test_a_bad_corpus_line_names_file_line_and_field(
    tmp_path: Path, line: object, message: str
) -> None:
    path = _write(tmp_path / "corpus.jsonl", [*DOCS, line])
    with pytest.raises(SearchDataError, match=message) as caught:
        read_corpus(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"answers": ["x"]}, r"q\.jsonl:2: field 'question': Field required"),
        ({"question": "Q?", "answers": []}, r"q\.jsonl:2: field 'answers': .*at least 1"),
        ({"question": "Q?", "answers": "x"}, r"q\.jsonl:2: field 'answers': .*valid list"),
        ({"question": "Q?", "answers": ["x", 3]}, r"q\.jsonl:2: field 'answers\.1': .*string"),
        ({"question": "Q?", "answers": [" "]}, r"q\.jsonl:2: field 'answers': an answer is empty"),
    ],
)
def test_a_bad_question_line_names_file_line_and_field(
    tmp_path: Path, line: object, message: str
) -> None:
    path = _write(tmp_path / "q.jsonl", [{"question": "Where?", "answers": ["Vellmora"]}, line])
    with pytest.raises(SearchDataError, match=message):
        read_questions(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(SearchDataError, match="no such corpus file"):
        read_corpus(tmp_path / "corpus.jsonl")
    with pytest.raises(SearchDataError, match="has no documents"):
        read_corpus(_write(tmp_path / "corpus.jsonl", ["", "  "]))
    with pytest.raises(SearchDataError, match="no such corpus file"):
        folder_data(tmp_path / "nowhere")


def test_a_data_folder_is_the_env_s_corpus_and_tasks(tmp_path: Path) -> None:
    _write(tmp_path / "corpus.jsonl", DOCS)
    _write(
        tmp_path / "valid_unseen.jsonl",
        [{"question": "Where is Vellmora?", "answers": ["Quorvia"]}],
    )
    config = CommonConfig.model_validate({"env": "search", "data_root": tmp_path})
    data = search_data(config)
    assert [d.title for d in data.corpus.documents] == ["Vellmora", "Quorvia"]
    (task,) = SPEC.tasks(config, ["valid_unseen"])
    assert task.task_id == "search/valid_unseen/0" and task.task_type == "custom"
    assert search_data(config) is data  # read once while the files are unchanged
    with pytest.raises(SearchDataError, match=r"valid_seen\.jsonl: no question file"):
        SPEC.tasks(config, ["valid_seen"])
    _write(tmp_path / "corpus.jsonl", [DOCS[0], {"id": "d2", "title": "Quorvia"}])
    with pytest.raises(SearchDataError, match=r"corpus\.jsonl:2: field 'text'"):
        search_data(config)
