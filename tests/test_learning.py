"""The learning test: RL through the Trainer lifts held-out success >= 30 points over random.

The fetch task (`agentrl.envs.toy.fetch`) is won only by reading the goal; a uniformly random
valid policy wins 1/9. The tiny from-scratch model (project tokenizer, full fine-tuning) is
warm-started on random valid play, then trained with the library's Trainer, GroupMean
advantages and the PPO loss (`agentrl.learning.TEST`, about 2-3 minutes on 2 CPU cores). The
test fails when learning breaks: with the advantage sign flipped or the loss zeroed, held-out
success stays at or below the random level (checked by hand; see docs/estimators.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


async def test_rl_beats_the_random_policy_on_held_out_games(tmp_path: Path) -> None:
    """Held-out success after RL >= random + 0.30, and above the warm start's."""
    import torch

    from agentrl.learning import TEST, fetch_tokenizer, run_learning

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        result = await run_learning(TEST, fetch_tokenizer(TEST), tmp_path / "run")
    finally:
        torch.set_num_threads(threads)
    curve = [round(p.success, 3) for p in result.curve]
    print(f"random {result.random_success:.3f} curve {curve} in {time.perf_counter() - start:.0f}s")
    assert 0.05 <= result.random_success <= 0.2  # about 1/9: the task is not won by chance
    assert result.before <= result.random_success + 0.15  # the warm start alone does not win
    assert result.after >= result.random_success + 0.30
    assert result.after >= result.before + 0.25
