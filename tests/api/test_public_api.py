"""The public API and optional-dependency errors."""

from __future__ import annotations

import pytest

import agentrl
from agentrl._optional import MissingExtraError, require


def test_all_names_are_importable() -> None:
    for name in agentrl.__all__:
        assert hasattr(agentrl, name), name


def test_missing_extra_names_the_extra() -> None:
    with pytest.raises(MissingExtraError, match=r"pip install 'agentrl\[alfworld\]'"):
        require("agentrl_no_such_module_xyz", "alfworld", "ALFWorld games")


def test_pure_modules_do_not_import_heavy_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agentrl, agentrl.types, agentrl.env, agentrl.tools, agentrl.advantages, "
        "agentrl.rewards, agentrl.datums, agentrl.testing, agentrl.envs.toy\n"
        "heavy = [m for m in ('torch', 'transformers', 'textworld', 'alfworld', 'pytrio') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
