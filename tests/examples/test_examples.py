"""Every numbered example runs to completion (smoke test).

An example whose source contains the line `# agentrl-example: slow` runs only in the slow
suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import paths

EXAMPLES = sorted(paths.EXAMPLES.glob("[0-9][0-9]_*.py"))


def _params() -> list[object]:
    params: list[object] = []
    for path in EXAMPLES:
        slow = "# agentrl-example: slow" in path.read_text()
        marks = [pytest.mark.slow] if slow else []
        params.append(pytest.param(path, id=path.name, marks=marks))
    return params


@pytest.mark.parametrize("example", _params())
def test_example_runs(example: Path, tmp_path: Path) -> None:
    env = {**os.environ, "AGENTRL_EXAMPLE_OUT": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert result.stdout.strip(), "an example should print what it did"
