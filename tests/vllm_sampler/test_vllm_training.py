"""Two training updates on the toy game end to end with `--sampler vllm`: the recipe builds
the local trainer + vLLM sampler, a warm start gives the random model tool calls, and each
update's rollout samples with the adapter of the update before (logprobs agree)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agentrl import recipe
from agentrl.config import TrainConfig
from agentrl.demo import demonstration_datums, warm_start
from agentrl.envs.toy import make_toy_group, toy_task, toy_tasks
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler
from agentrl.trainer import Trainer

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed here: run `make test-vllm`", allow_module_level=True)

MISMATCH_TOLERANCE = 1e-3
"""Largest |vLLM logprob - trainer logprob| on trained tokens (float32; ~1e-5 measured)."""


def _plan(seed: int) -> list[str]:
    game = toy_task(seed)
    return [
        f"go to {game.object_place}",
        f"take {game.obj} from {game.object_place}",
        f"go to {game.target}",
        f"move {game.obj} to {game.target}",
    ]


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
        games_per_batch=1,
        group_size=4,
        max_episode_steps=4,
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
        demos = [
            await rollout_group(
                task,
                env_factory=make_toy_group,
                sampler=ScriptedSampler(tokenizer, [[protocol.call_text(a) for a in _plan(i)]]),
                renderer=renderer,
                protocol=protocol,
                config=RolloutConfig(group_size=1, max_env_steps=6),
            )
            for i, task in enumerate(tasks)
        ]
        losses = await warm_start(backend, demonstration_datums(demos, 2), 8, 1e-2)
        assert losses[-1] < losses[0]
        trainer = Trainer(
            config=config,
            backend=backend,
            env_factory=recipe.env_factory_for(config),
            tasks=tasks,
            renderer=renderer,
            protocol=protocol,
            progress=False,
        )
        result = await trainer.run()
    finally:
        await backend.close()
    assert [m.update for m in result.metrics] == [1, 2]
    assert len(result.checkpoints) == 2
    assert backend.exports >= 2  # a new adapter (and LoRA id) after the warm start and updates
    for m in result.metrics:
        assert m.stats.episodes == 4
        assert m.stats.error_rate == 0.0
    trained = [m for m in result.metrics if m.trained_tokens > 0]
    for m in trained:
        assert m.logprob_diff_max is not None and m.logprob_diff_max < MISMATCH_TOLERANCE
    print(
        "updates:",
        [(m.update, m.trained_tokens, m.sampler_kl, m.logprob_diff_max) for m in result.metrics],
    )
