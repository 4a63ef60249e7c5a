"""Fixtures for the fast ALFWorld engine tests."""

from __future__ import annotations

import pytest

from tests.envs.alfworld.fast.fast_games import write_tiny_game


@pytest.fixture(scope="session")
def tiny_game(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of the tiny kitchen game (see `fast_games.py`)."""
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    return str(write_tiny_game(tmp_path_factory.mktemp("tiny") / "tiny_kitchen"))
