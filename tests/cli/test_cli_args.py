"""Flags generated from the configs: parsing, defaults, errors named by flag."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from agentrl.cli_args import ConfigArgumentError, add_config_arguments, config_from_args
from agentrl.config import EstimatorName, EvalConfig, EvalSplit, TrainConfig


def _parser(model: type, **kwargs: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl", exit_on_error=False)
    add_config_arguments(parser, model, **kwargs)  # type: ignore[arg-type]
    return parser


def test_recipe_flags_parse_into_train_config() -> None:
    flags = (
        "--max-steps 3 --games-per-batch 2 --group-size 4 --learning-rate 2e-5 --lora-rank 8 "
        "--save-every 1 --no-show-admissible --estimator gigpo --run-dir /tmp/x --top-p 0.9"
    )
    ns = _parser(TrainConfig).parse_args(flags.split(" "))
    c = config_from_args(TrainConfig, ns)
    assert (c.max_steps, c.games_per_batch, c.group_size, c.lora_rank) == (3, 2, 4, 8)
    assert c.learning_rate == 2e-5
    assert c.show_admissible is False
    assert c.estimator is EstimatorName.GIGPO
    assert c.run_dir == Path("/tmp/x")
    assert c.top_p == 0.9
    # flags not given keep the recipe defaults
    assert (c.temperature, c.seed, c.max_trajectory_tokens) == (1.0, 42, 12_000)


def test_eval_flags_and_required_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser(EvalConfig)
    out = tmp_path / "e.jsonl"
    ns = parser.parse_args(
        ["--output", str(out), "--split", "valid_seen", "--limit-per-split", "5", "--resume"]
    )
    c = config_from_args(EvalConfig, ns)
    assert (c.output, c.split, c.limit_per_split, c.resume) == (out, EvalSplit.VALID_SEEN, 5, True)
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert "the following arguments are required: --output" in capsys.readouterr().err


def test_bad_values_are_reported_per_flag(tmp_path: Path) -> None:
    ns = _parser(TrainConfig).parse_args(["--top-p", "1.5", "--lora-rank", "many"])
    with pytest.raises(ConfigArgumentError) as info:
        config_from_args(TrainConfig, ns)
    lines = str(info.value).splitlines()
    assert any(line.startswith("--top-p: ") and "1" in line for line in lines)
    assert any(line.startswith("--lora-rank: ") and "integer" in line for line in lines)
    ns = _parser(EvalConfig).parse_args(["--output", str(tmp_path / "e.jsonl"), "--resume"])
    with pytest.raises(ConfigArgumentError, match="contradict"):
        config_from_args(EvalConfig, ns, overwrite_output=True)


def test_enum_choices_and_help_text() -> None:
    parser = _parser(TrainConfig, exclude={"resume"})
    with pytest.raises(argparse.ArgumentError, match="invalid choice"):
        parser.parse_args(["--backend", "vllm"])
    text = parser.format_help()
    assert "--swanlab-mode {online,offline,local,disabled}" in text
    assert "LoRA rank (default: 32)" in text
    assert "--no-show-admissible" in text
    assert re.search(r"--resume\b(?!-)", text) is None  # (--resume-fallback is another field)
