"""The distillation example of docs/distillation.md runs and prints what it claims: a local
teacher scores a local student's replies and distilled importance-sampling steps move the
student towards the teacher."""

from __future__ import annotations

import pytest

from tests.helpers.doc_examples import doc_example, expected_output, run_example
from tests.helpers.paths import DOCS

pytest.importorskip("torch")
pytest.importorskip("transformers")

DOC = DOCS / "distillation.md"


def test_distillation_example_runs_as_documented() -> None:
    source = doc_example(DOC, "distillation")
    assert run_example(source, DOC).splitlines() == expected_output(source)
