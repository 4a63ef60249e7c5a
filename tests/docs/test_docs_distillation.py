"""The distillation example of docs/distillation.md runs and prints what it claims: a local
teacher scores a local student's replies and distilled importance-sampling steps move the
student towards the teacher."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tests.helpers.paths import DOCS

pytest.importorskip("torch")
pytest.importorskip("transformers")

DOC = DOCS / "distillation.md"


def test_distillation_example_runs_as_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    code = re.search(r"<!-- example: distillation -->\n```python\n(.*?)```", text, re.DOTALL)
    assert code is not None
    expected = [line[2:] for line in code.group(1).splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(DOC), "exec"), {"__name__": "docs_example"})
    assert out.getvalue().splitlines() == expected
