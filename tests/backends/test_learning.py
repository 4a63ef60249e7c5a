"""Learning test: GRPO with the local backend on the toy environment raises mean reward.

Everything is real: the Qwen tokenizer and its chat template, the rollout engine, the toy
`EnvGroup`, `WinMinusInvalid` rewards, `GroupMean` advantages, `build_datums`, and a tiny
random Qwen3 model trained through `LocalBackend` (LoRA, PPO loss, AdamW).

A random model never produces a usable reply, so every group would be degenerate (all rewards
equal, no signal). The test therefore (1) uses a plain-command protocol (the reply is the
command itself, no tool-call markup: a short, learnable format) and (2) warm-starts with a
few supervised steps on demonstrations whose commands are drawn *uniformly* from the
available actions. After the warm start the model writes commands but most are not
executable in the current state; only GRPO can teach it which ones are, because only the
reward (-0.1 per invalid action) says so. Fixed seeds throughout.

Measured on 2 shared CPU cores (see docs/backends.md): the default single-step variant takes
about 60 s; the multi-turn variant (marked slow) about 3 minutes.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from tests.backends.toy_learning import MULTI_TURN, SINGLE_STEP, run_toy_learning


@pytest.mark.slow  # the learning test (tests/recipes) covers RL lifting success
async def test_grpo_raises_reward_single_step_toy(qwen_tokenizer) -> None:
    """Default variant (~60 s): one command per episode; reward in [-0.1, 0]."""
    start = time.perf_counter()
    result = await run_toy_learning(SINGLE_STEP, qwen_tokenizer)
    before, after, history = result.before, result.after, result.history
    elapsed = time.perf_counter() - start
    print(f"single-step: {before} -> {after} in {elapsed:.0f}s")
    assert before.invalid_per_turn > 0.5  # the warm start alone does not know what is valid
    assert after.reward - before.reward >= 0.04  # >= 40% of the reward range
    assert after.invalid_per_turn <= before.invalid_per_turn - 0.4
    assert history[-1].reward > history[0].reward


@pytest.mark.slow
async def test_grpo_raises_reward_multi_turn_toy(qwen_tokenizer) -> None:
    """Slow variant (~3 min): four commands per episode; reward in [-0.4, 1]."""
    start = time.perf_counter()
    result = await run_toy_learning(MULTI_TURN, qwen_tokenizer)
    before, after = result.before, result.after
    elapsed = time.perf_counter() - start
    print(f"multi-turn: {before} -> {after} in {elapsed:.0f}s")
    assert before.invalid_per_turn > 0.5
    assert after.reward - before.reward >= 0.15
    assert after.invalid_per_turn <= before.invalid_per_turn - 0.4
