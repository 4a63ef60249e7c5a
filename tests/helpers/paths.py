"""Folders the tests read, computed once from this file (tests/helpers/paths.py).

`REPO` is the repository root, so a test file does not count `parents[N]` from its own depth.
`SHARED` is `../shared` next to the repository (official ALFWorld games, chat templates).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
DOCS = REPO / "docs"
EXAMPLES = REPO / "examples"
BENCHMARKS = REPO / "benchmarks"
SHARED = REPO.parent / "shared"
