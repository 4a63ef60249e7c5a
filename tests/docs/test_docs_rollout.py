"""The rollout example of docs/tools-and-rollout.md runs and prints what it claims."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

from tests.helpers.paths import DOCS

DOC = DOCS / "tools-and-rollout.md"


def test_rollout_example_runs_as_documented(qwen_tokenizer: Any) -> None:
    text = DOC.read_text(encoding="utf-8")
    code = re.search(r"<!-- example: rollout -->\n```python\n(.*?)```", text, re.DOTALL)
    assert code is not None
    expected = [line[2:] for line in code.group(1).splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(DOC), "exec"), {"__name__": "docs_example"})
    assert out.getvalue().splitlines() == expected
