"""The README section's local-backend example runs and prints what it claims."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import DOCS

pytest.importorskip("torch")
pytest.importorskip("peft")

DOC = DOCS / "readme" / "6-backends.md"


def test_readme_example_runs_as_documented(qwen_tokenizer: Any, tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert code is not None
    source = code.group(1).replace("/tmp/agentrl-demo", str(tmp_path))
    expected = [line[2:] for line in source.splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(DOC), "exec"), {"__name__": "readme_example"})
    assert out.getvalue().splitlines() == expected
