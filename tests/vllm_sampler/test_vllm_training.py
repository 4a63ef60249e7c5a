"""Two training updates on the toy game end to end with `--sampler vllm`: the recipe builds
the local trainer + vLLM sampler, and each update's rollout samples with the adapter of the
update before (a new LoRA id each time; vLLM's logprobs agree with the trainer's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agentrl import recipe
from agentrl.config import TrainConfig
from agentrl.envs.toy import toy_tasks
from agentrl.trainer import Trainer
from agentrl.types import Trajectory

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed here: run `make test-vllm`", allow_module_level=True)

MISMATCH_TOLERANCE = 1e-3
"""Largest |vLLM logprob - trainer logprob| on trained tokens (float32; ~1e-5 measured)."""


def _token_reward(trajectory: Trajectory) -> float:
    """A reward that differs between branches (a random model never wins the toy game, so the
    recipe's reward would give every group zero advantages and nothing would be trained)."""
    return (trajectory.turns[0].completion_tokens[0] % 7) / 7.0 if trajectory.turns else 0.0


@pytest.mark.asyncio
async def test_two_updates_with_the_vllm_sampler(tmp_path: Path) -> None:
    from agentrl.backends.vllm import VllmBackend

    config = TrainConfig(
        base_model="tiny",
        backend="local",  # type: ignore[arg-type]
        sampler="vllm",  # type: ignore[arg-type]
        device="cpu",
        env="toy",  # type: ignore[arg-type]
        max_steps=2,
        games_per_batch=2,
        group_size=4,
        max_episode_steps=2,
        max_trajectory_tokens=1_200,
        max_assistant_tokens=24,
        lora_rank=8,
        learning_rate=1e-4,
        save_every=1,
        run_dir=tmp_path / "run",
        show_admissible=False,
    )
    tokenizer = recipe.tokenizer_for(config)
    protocol = recipe.tool_protocol_for(config)
    renderer = recipe.renderer_for(tokenizer, protocol, config)
    backend = await recipe.training_backend_for(config, tokenizer)
    assert isinstance(backend, VllmBackend)
    try:
        tasks = toy_tasks(4)
        trainer = Trainer(
            config=config,
            backend=backend,
            env_factory=recipe.env_factory_for(config),
            tasks=tasks,
            renderer=renderer,
            protocol=protocol,
            reward_fn=_token_reward,
            progress=False,
        )
        result = await trainer.run()
    finally:
        await backend.close()
    print(
        "updates (trained tokens, sampler_kl, logprob_diff_max, reward mean):",
        [
            (m.trained_tokens, m.sampler_kl, m.logprob_diff_max, m.stats.reward_mean)
            for m in result.metrics
        ],
    )
    assert [m.update for m in result.metrics] == [1, 2]
    assert len(result.checkpoints) == 2
    for m in result.metrics:
        assert m.stats.episodes == 8
        assert m.stats.error_rate == 0.0
    # one export before update 1 (the fresh adapter), one more after every optimizer
    # step that a later rollout used (each under a new LoRA id)
    trained = [m for m in result.metrics if m.trained_tokens > 0]
    assert backend.exports == 1 + sum(1 for m in result.metrics[:-1] if m.trained_tokens > 0)
    assert trained, "no update had a learning signal"
    for m in trained:
        assert m.logprob_diff_max is not None and m.logprob_diff_max < MISMATCH_TOLERANCE


async def test_eval_with_the_vllm_sampler_serves_a_checkpoint(tmp_path: Path) -> None:
    """`agentrl eval --backend local --sampler vllm --model-path <checkpoint>`: the base model
    plus the checkpoint's adapter, in a fresh engine."""
    from agentrl.config import EvalConfig
    from agentrl.evaluation import evaluate

    train = TrainConfig(
        base_model="tiny",
        backend="local",  # type: ignore[arg-type]
        device="cpu",
        env="toy",  # type: ignore[arg-type]
        sampler="vllm",  # type: ignore[arg-type]
        lora_rank=8,
        run_dir=tmp_path / "run",
        max_trajectory_tokens=1_200,
        max_assistant_tokens=16,
    )
    tokenizer = recipe.tokenizer_for(train)
    local = recipe.local_backend_for(train, tokenizer, tmp_path / "ckpt", 8)
    ref = await local.save("update-0001")
    config = EvalConfig(
        base_model="tiny",
        backend="local",  # type: ignore[arg-type]
        device="cpu",
        env="toy",  # type: ignore[arg-type]
        sampler="vllm",  # type: ignore[arg-type]
        model_path=ref.sampler_path,
        split="valid_seen",  # type: ignore[arg-type]
        limit_per_split=2,
        max_episode_steps=2,
        max_trajectory_tokens=1_200,
        max_assistant_tokens=16,
        output=tmp_path / "eval" / "e.jsonl",
    )
    outcome = await evaluate(config, progress=False)
    assert outcome.played == 2
    overall = outcome.summaries[-1]
    assert overall.stats.episodes == 2 and overall.stats.error_rate == 0.0
