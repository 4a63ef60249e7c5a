"""Run a docs page's marked example (`<!-- example: NAME -->` before a python block)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path


def doc_example(page: Path, name: str) -> str:
    """The source of example `name` of `page` (fails the test when the page has none)."""
    text = page.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"{page.name} has no example {name!r}"
    return found.group(1)


def expected_output(source: str) -> list[str]:
    """The lines the example says it prints (its `# ` comment lines)."""
    return [line[2:] for line in source.splitlines() if line.startswith("# ")]


def run_example(source: str, page: Path, namespace: dict[str, object] | None = None) -> str:
    """Execute `source` (named after `page` in tracebacks); what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(
            compile(source, str(page), "exec"),
            {"__name__": "docs_example"} if namespace is None else namespace,
        )
    return out.getvalue()
