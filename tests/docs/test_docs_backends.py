"""The one-update example of docs/backends.md runs and prints what it claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.doc_examples import doc_example, expected_output, run_example
from tests.helpers.paths import DOCS

pytest.importorskip("torch")
pytest.importorskip("peft")

DOC = DOCS / "backends.md"


def test_one_update_example_runs_as_documented(qwen_tokenizer: Any, tmp_path: Path) -> None:
    source = doc_example(DOC, "one-update").replace("/tmp/agentrl-demo", str(tmp_path))
    assert run_example(source, DOC).splitlines() == expected_output(source)
