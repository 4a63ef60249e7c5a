"""Shared fixtures.

`qwen_tokenizer`: a real Qwen tokenizer built from dashscope's vocabulary (cached on disk).

`alfworld_games`: a small verified ALFWorld game set generated once per test session
(6 train covering all six task types, 2 valid_seen, 2 valid_unseen; seed 0). It is cached in
pytest's cache folder under a key that changes whenever the generator's code changes, so a
rerun reuses it; the test processes of one run (pytest-xdist) share it: the first generates it
under a file lock, the others wait and read it. Tests that need it skip when the `alfworld`
extra is missing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import SHARED, SRC

# One torch (OpenMP) thread per test process, and in the CLI subprocesses the tests start: the
# suite runs one process per core (pytest-xdist), and the tiny models of the tests gain nothing
# from a second thread but lose to the other process's (about 11% of the suite's time on 2
# cores). Set before any test imports torch; a value given in the environment wins. The
# learning tests pin their own thread count.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ALFWORLD_GAMES = {"train": 6, "valid_seen": 2, "valid_unseen": 2, "seed": 0}


def _generator_digest() -> str:
    src = SRC / "agentrl" / "envs" / "alfworld"
    digest = hashlib.sha1(repr(sorted(ALFWORLD_GAMES.items())).encode())
    for name in ("problem.py", "scenes.py", "generate.py", "expert.py"):
        digest.update((src / name).read_bytes())
    return digest.hexdigest()[:12]


@pytest.fixture(scope="session")
def alfworld_games(request: pytest.FixtureRequest):  # -> GenerationReport
    """A verified generated ALFWorld game set (`report.root`, `report.games`)."""
    pytest.importorskip("textworld")
    pytest.importorskip("alfworld")
    from agentrl.envs.alfworld.generate import generate_games

    name = f"alfworld-games-{_generator_digest()}"
    cache = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`
    if cache is not None:
        out = cache.mkdir(name)
    else:  # the folder above each xdist worker's base temp is the run's, shared by them all
        base = request.getfixturevalue("tmp_path_factory").getbasetemp()
        shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        out = shared / name
        out.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process generates, the others then resume it
        report = generate_games(out, progress=False, **ALFWORLD_GAMES)
    expected = sum(ALFWORLD_GAMES[split] for split in ("train", "valid_seen", "valid_unseen"))
    assert len(report.games) == expected, report.failures
    return report


@pytest.fixture(scope="session")
def official_alfworld_root() -> Path:
    """`../shared/alfworld` next to the repository (skips when absent).

    `AGENTRL_OFFICIAL_ALFWORLD` overrides the location (e.g. in a git worktree).
    """
    default = SHARED / "alfworld"
    root = Path(os.environ.get("AGENTRL_OFFICIAL_ALFWORLD", default))
    if not (root / "json_2.1.1").is_dir():
        pytest.skip(f"official ALFWorld games not found at {root}")
    return root


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    """Qwen's real BPE tokenizer with agentrl's Qwen3-style chat template (built once, cached)."""
    pytest.importorskip("transformers")
    pytest.importorskip("dashscope")
    from agentrl.tokenizer import build_qwen_tokenizer

    return build_qwen_tokenizer()


CI_REQUIRED_SKIPS = (
    "could not import",
    "Chromium is not installed",
    "the pycode sandbox cannot isolate",
)
"""Skip reasons that mean a missing dependency: under `CI=true` (`.ci/run`), which installs
every extra and Chromium, such a skip is a failure, so no test group silently stops running.
`AGENTRL_ALLOW_SKIPS=1` turns this off."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    strict = os.environ.get("CI") == "true" and os.environ.get("AGENTRL_ALLOW_SKIPS") != "1"
    if strict and report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if any(marker in reason for marker in CI_REQUIRED_SKIPS):
            report.outcome = "failed"
            report.longrepr = f"skipped in CI for a missing dependency: {reason}"
    return report


LONG_TESTS_FIRST = (
    "tests/recipes/test_learning_wins.py::test_rl_beats_the_random_policy_on_held_out_games",
    "tests/training/test_faults.py::test_sigterm_during_a_long_local_rollout_stops_the_generation",
    "tests/envs/pycode/test_sandbox_nonroot.py::",
    "tests/recipes/test_demo.py::test_quick_demo_on_generated_games",
    "tests/recipes/test_learning_reproducible.py::",
    "tests/training/test_faults.py::test_sigkill_then_resume",
    "tests/examples/test_examples.py::test_example_runs[03_train_tiny_model.py]",
    "tests/examples/test_notebooks.py::",
    "tests/cli/test_newcomer.py::test_the_first_cli_run_on_the_tiny_model_finishes",
    "tests/training/test_faults.py::test_a_second_writer",
    "tests/training/test_trainer_distillation.py::test_a_resumed_distillation_run",
    "tests/training/test_faults.py::test_sigterm_in_the_background",
)
"""Node-id prefixes of the longest tests (about 20-170 s each), in falling order of length.
They are collected first, so the test processes (pytest-xdist hands tests out in collection
order) start them early and finish together, instead of one process running a three-minute
test alone at the end. Only the order changes; every test still runs."""


def _long_rank(item: pytest.Item) -> int:
    for rank, prefix in enumerate(LONG_TESTS_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONG_TESTS_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_long_rank)  # stable: the rest keep their order
