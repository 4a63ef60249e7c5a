"""`--behaviour-logprobs trainer` and `--sampler vllm` selection (no vLLM needed here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agentrl.backends.base import LossConfig, LossName
from agentrl.testing import synthetic_group

pytest.importorskip("torch")


def _datums(tokenizer: object) -> list[object]:
    from agentrl.advantages import GroupMean
    from agentrl.datums import build_datums

    group = synthetic_group([1.0, 0.0, 0.0, 0.5], group_id="g")
    return build_datums([group], GroupMean().estimate([group]))  # type: ignore[return-value]


def _config(tmp_path: Path, **extra: object) -> object:
    from agentrl.config import TrainConfig

    return TrainConfig(
        base_model="tiny",
        backend="local",  # type: ignore[arg-type]
        device="cpu",
        env="toy",  # type: ignore[arg-type]
        lora_rank=4,
        run_dir=tmp_path / "run",
        max_trajectory_tokens=1_000,
        max_assistant_tokens=16,
        **extra,  # type: ignore[arg-type]
    )


async def test_trainer_behaviour_recomputes_logprobs_and_reports_the_mismatch(
    tmp_path: Path,
) -> None:
    from agentrl import recipe
    from agentrl.backends.local.behaviour import TrainerBehaviour, trainer_logprobs

    config = _config(tmp_path, behaviour_logprobs="trainer")
    tokenizer = recipe.tokenizer_for(config)  # type: ignore[arg-type]
    backend = await recipe.training_backend_for(config, tokenizer)  # type: ignore[arg-type]
    assert isinstance(backend, TrainerBehaviour)
    datums = _datums(tokenizer)
    result = await backend.forward_backward(datums, LossName.PPO, LossConfig())  # type: ignore[arg-type]
    # the synthetic datums' logprobs are made up: far from the model's
    assert result.mismatch is not None and result.mismatch.max_abs_diff > 0.5
    # PPO ran on the recomputed logprobs: ratio 1 everywhere, so nothing was clipped
    assert result.metrics.get("clip_fraction", 0.0) == pytest.approx(0.0)
    recomputed = trainer_logprobs(backend.engine, datums)  # type: ignore[arg-type]
    assert [len(r) for r in recomputed] == [len(d) for d in datums]  # type: ignore[arg-type]
    await backend.optim_step(config.adam_params())  # type: ignore[attr-defined]


def test_vllm_needs_the_local_backend(tmp_path: Path) -> None:
    import asyncio

    from agentrl import recipe
    from agentrl.config import TrainConfig

    config = TrainConfig(backend="pytrio", sampler="vllm", run_dir=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--backend local"):
        asyncio.run(recipe.training_backend_for(config, None))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
async def test_vllm_sampler_without_vllm_names_the_extra(tmp_path: Path) -> None:
    from agentrl import recipe
    from agentrl._optional import MissingExtraError

    config = _config(tmp_path, sampler="vllm")
    tokenizer = recipe.tokenizer_for(config)  # type: ignore[arg-type]
    with pytest.raises(MissingExtraError, match=r"agentrl\[vllm\]"):
        await recipe.training_backend_for(config, tokenizer)  # type: ignore[arg-type]
    assert (tmp_path / "run" / "vllm" / "base" / "config.json").is_file()


def test_vllm_eval_needs_the_local_backend(tmp_path: Path) -> None:
    import asyncio

    from agentrl import recipe
    from agentrl.config import EvalConfig

    config = EvalConfig(backend="pytrio", sampler="vllm", output=tmp_path / "e.jsonl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--backend local"):
        asyncio.run(recipe.eval_sampler_for(config, None))


def test_flags() -> None:
    from agentrl.cli import build_parser
    from agentrl.cli_args import config_from_args
    from agentrl.config import BehaviourLogprobs, SamplerName, TrainConfig

    argv = ["train", "--backend", "local", "--sampler", "vllm", "--behaviour-logprobs", "trainer"]
    config = config_from_args(TrainConfig, build_parser().parse_args(argv))
    assert config.sampler is SamplerName.VLLM
    assert config.behaviour_logprobs is BehaviourLogprobs.TRAINER
    assert TrainConfig().sampler is SamplerName.BUILTIN
