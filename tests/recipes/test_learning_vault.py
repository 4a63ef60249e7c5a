"""The vault benchmark's plumbing (`benchmarks/learning_vault.py --size smoke`): runs, the
per-seed table, the PNG and the last line. The measured runs are in docs/learning.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import BENCHMARKS

pytest.importorskip("torch")
pytest.importorskip("transformers")

SUMMARY = (
    r"task=vault random_success=[\d.]+ success_before=[\d.]+ success_after=[\d.]+ seeds=1 "
    r"minutes=[\d.]+"
)


@pytest.mark.slow  # the learning test (tests/recipes) covers RL lifting success
def test_vault_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    command = [sys.executable, str(BENCHMARKS / "learning_vault.py"), "--out", str(out)]
    command += ["--size", "smoke", "--seeds", "1", "--variants", "fetch_setup"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(SUMMARY, last), last
    table = (out / "learning_vault.md").read_text()
    assert "| fetch_setup | 0 |" in table
    assert "| **fetch_setup** | mean |" in table
    assert (out / "learning_vault.png").stat().st_size > 0
    assert (out / "runs" / "fetch_setup-seed0.json").exists()


def test_a_winners_only_warm_start_keeps_exactly_the_won_games() -> None:
    from agentrl.recipes.learning import won_datums
    from agentrl.testing import synthetic_group

    groups = [
        synthetic_group([1.0, 0.0, 1.0], group_id="a"),
        synthetic_group([0.0, 0.0], group_id="b"),
        synthetic_group([0.0, 1.0], group_id="c"),
    ]
    won = [t for g in groups for t in g.trajectories if t.won]
    datums = won_datums(groups)
    assert len(datums) == len(won) == 3
    for datum, trajectory in zip(datums, won, strict=True):
        trained = datum.target_tokens[datum.mask == 1.0].tolist()
        assert trained == [tok for turn in trajectory.turns for tok in turn.completion_tokens]
        assert set(datum.advantages[datum.mask == 1.0].tolist()) == {1.0}
