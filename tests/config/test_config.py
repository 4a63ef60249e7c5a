"""Train / eval configs: recipe defaults, documentation, validation messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from agentrl import recipe
from agentrl.advantages import GiGPO, GroupMean, GroupNormalized, LeaveOneOut
from agentrl.backends.base import LossName, MaskMode
from agentrl.config import (
    BackendName,
    EstimatorName,
    EvalConfig,
    EvalPolicy,
    EvalSplit,
    SwanLabMode,
    TrainConfig,
)
from agentrl.rewards import WinMinusInvalid
from agentrl.testing import synthetic_trajectory
from agentrl.types import CutReply, StepCounting, TurnStatus


def test_train_defaults_are_the_published_recipe() -> None:
    c = TrainConfig()
    assert c.base_model == "Qwen/Qwen3.5-4B"
    assert c.lora_rank == 32
    assert c.max_steps == 80
    assert (c.games_per_batch, c.group_size) == (8, 8)
    assert c.max_episode_steps == 50
    assert (c.max_trajectory_tokens, c.max_assistant_tokens) == (12_000, 2_048)
    assert (c.temperature, c.top_p) == (1.0, 1.0)
    adam = c.adam_params()
    assert (adam.learning_rate, adam.beta1, adam.beta2) == (1e-6, 0.9, 0.95)
    assert (adam.weight_decay, adam.grad_clip_norm) == (0.0, 1.0)
    loss = c.loss_config()
    assert (loss.clip_low, loss.clip_high) == (0.8, 1.2)
    assert c.loss is LossName.PPO
    assert c.save_every == 20
    assert c.seed == 42
    assert c.show_admissible is True
    assert c.backend is BackendName.PYTRIO
    assert c.estimator is EstimatorName.GROUP_MEAN
    params = c.sampling_params(stop_tokens=(7,))
    assert (params.max_tokens, params.stop_tokens, params.seed) == (2048, (7,), 42)
    # the recipe's loop and its service-side loss normalisation
    assert c.step_counting is StepCounting.TURNS and c.cut_reply is CutReply.CONTINUE
    assert c.mask_mode is MaskMode.ZERO_ADVANTAGE and c.remote_recovery is True
    rollout = recipe.rollout_config_for(c, c.group_size, params)
    assert (rollout.step_counting, rollout.cut_reply) == (StepCounting.TURNS, CutReply.CONTINUE)


def test_turn_semantics_options_from_the_command_line() -> None:
    import argparse

    from agentrl.cli_args import add_config_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, TrainConfig)
    args = parser.parse_args(
        ["--step-counting", "env_calls", "--cut-reply", "end", "--mask-mode", "ignore_index"]
    )
    c = config_from_args(TrainConfig, args)
    assert c.step_counting is StepCounting.ENV_CALLS and c.cut_reply is CutReply.END
    assert c.mask_mode is MaskMode.IGNORE_INDEX
    with pytest.raises(SystemExit):
        parser.parse_args(["--cut-reply", "stop"])


def test_eval_defaults_are_the_published_evaluation(tmp_path: Path) -> None:
    c = EvalConfig(output=tmp_path / "e.jsonl")
    assert (c.temperature, c.top_p, c.seed) == (0.01, 1.0, 42)
    assert c.trajectories_per_game == 1
    assert c.max_episode_steps == 50
    assert c.games_per_batch == 16
    assert c.split is EvalSplit.ALL
    assert c.split.splits == ("valid_seen", "valid_unseen")
    assert EvalSplit.VALID_UNSEEN.splits == ("valid_unseen",)
    assert c.limit_per_split is None
    assert (c.overwrite_output, c.resume) == (False, False)
    assert c.policy is EvalPolicy.MODEL
    assert c.sampling_params().temperature == 0.01


@pytest.mark.parametrize("model", [TrainConfig, EvalConfig])
def test_every_field_has_a_one_line_description(model: type[BaseModel]) -> None:
    for name, info in model.model_fields.items():
        assert info.description, f"{model.__name__}.{name} has no description"
        assert "\n" not in info.description


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="lora_rnak"):
        TrainConfig.model_validate({"lora_rnak": 8})


def test_strings_become_enums() -> None:
    c = TrainConfig.model_validate(
        {"backend": "local", "estimator": "gigpo", "swanlab_mode": "offline", "group_size": 1}
    )
    assert c.backend is BackendName.LOCAL
    assert c.swanlab_mode is SwanLabMode.OFFLINE
    with pytest.raises(ValidationError, match="pytrio"):
        TrainConfig.model_validate({"backend": "vllm"})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"top_p": 0.0}, "top_p"),
        ({"temperature": -1}, "temperature"),
        ({"clip_low": 1.5}, "clip_low"),
        ({"clip_high": 0.9}, "clip_high"),
        ({"beta2": 1.0}, "beta2"),
        ({"device": "gpu"}, "cuda:N"),
        ({"max_trajectory_tokens": 1000, "max_assistant_tokens": 1000}, "must be smaller"),
        ({"group_size": 1}, "use group_size >= 2"),
    ],
)
def test_bad_train_values_have_clear_messages(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainConfig.model_validate(values)


def test_eval_conflicts(tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    with pytest.raises(ValidationError, match="contradict"):
        EvalConfig(output=out, overwrite_output=True, resume=True)
    with pytest.raises(ValidationError, match="planner"):
        EvalConfig(output=out, policy=EvalPolicy.PLANNER, model_path="trio://x")
    with pytest.raises(ValidationError, match=r"\.jsonl"):
        EvalConfig(output=tmp_path / "e.json")
    with pytest.raises(ValidationError, match="output"):
        EvalConfig.model_validate({})


def test_configs_are_frozen() -> None:
    c = TrainConfig()
    with pytest.raises(ValidationError):
        c.lora_rank = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("group_mean", GroupMean),
        ("group_normalized", GroupNormalized),
        ("leave_one_out", LeaveOneOut),
        ("gigpo", GiGPO),
    ],
)
def test_estimator_by_name(name: str, kind: type) -> None:
    estimator = TrainConfig(estimator=EstimatorName(name)).advantage_estimator()
    assert isinstance(estimator, kind)


def test_reward_and_gigpo_options_flow_through() -> None:
    c = TrainConfig(
        estimator=EstimatorName.GIGPO, gigpo_gamma=0.5, invalid_penalty=0.25, win_reward=2.0
    )
    estimator = c.advantage_estimator()
    assert isinstance(estimator, GiGPO)
    assert estimator.gamma == 0.5
    assert estimator.reward_fn == WinMinusInvalid(win_reward=2.0, invalid_penalty=0.25)
    trajectory = synthetic_trajectory(
        completion_lens=(2, 2), statuses=(TurnStatus.NOT_ADMISSIBLE, TurnStatus.EXECUTED), won=True
    )
    assert c.reward_fn()(trajectory) == pytest.approx(2.0 - 0.25)


def test_json_round_trip(tmp_path: Path) -> None:
    c = EvalConfig(output=tmp_path / "e.jsonl", split=EvalSplit.VALID_SEEN, limit_per_split=3)
    again = EvalConfig.model_validate_json(c.model_dump_json())
    assert again == c
