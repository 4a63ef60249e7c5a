"""The rollout example of docs/tools-and-rollout.md runs and prints what it claims."""

from __future__ import annotations

from typing import Any

from tests.helpers.doc_examples import doc_example, expected_output, run_example
from tests.helpers.paths import DOCS

DOC = DOCS / "tools-and-rollout.md"


def test_rollout_example_runs_as_documented(qwen_tokenizer: Any) -> None:
    source = doc_example(DOC, "rollout")
    assert run_example(source, DOC).splitlines() == expected_output(source)
