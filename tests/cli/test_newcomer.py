"""The newcomer's path: a first CLI run sized to the model, and errors that say what and where.

The first `agentrl train` a user types on a CPU must finish (the cpu-small preset), print what
it chose, and leave logs without progress-bar debris; an offline model name fails in one line
at once; an environment's crash keeps where it was raised; the env checker shows where two
branches differ; progress bars never warn in a kernel without widgets.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentrl.config import EvalConfig, TrainConfig
from agentrl.config.names import Preset
from agentrl.core.errors import describe_exception
from agentrl.core.progress import progress_bar
from agentrl.core.types import EnvAction, EnvStep, TaskInfo, ToolCall
from agentrl.envs.toy import ToyEnvGroup, make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler, check_env_group
from agentrl.testing.env_check import EnvCheckError
from agentrl.tools import FunctionEnv, ToolInfraError, function_env_factory, tool
from tests.helpers.fault_helpers import agentrl, one_error_line

PROTOCOL = toy_tool_protocol()


def test_the_first_cli_run_on_the_tiny_model_finishes(tmp_path: Path) -> None:
    """The README's first command with no sizing flags: the cpu-small preset, one update."""
    pytest.importorskip("torch")
    started = time.monotonic()
    result = agentrl(
        tmp_path, "train", "--env", "toy", "--base-model", "tiny", "--device", "cpu",
        "--max-steps", "1", timeout=300,
    )  # fmt: skip
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert "preset cpu-small: 2 games x 4, 8 steps, 64 tokens/reply" in result.stdout
    assert "finished update 1 of 1" in result.stdout
    assert seconds < 180, seconds  # ~20 s on the loaded 2-core machine; 240 s before presets
    run = json.loads((tmp_path / "runs" / "train" / "run.json").read_text())
    config = run["config"]
    assert config["preset"] == "cpu-small" and config["backend"] == "local"
    assert (config["games_per_batch"], config["group_size"]) == (2, 4)
    # a log (no terminal) gets no progress bars between the table's rows
    assert "\r" not in result.stdout and "update/s" not in result.stderr
    header = next(line for line in result.stdout.splitlines() if line.split()[:1] == ["update"])
    assert header.split()[-1] == "errors"


def test_presets_fill_only_what_was_not_given() -> None:
    small = TrainConfig(base_model="tiny", max_assistant_tokens=200)
    assert small.preset is Preset.CPU_SMALL and small.max_assistant_tokens == 200
    assert (small.games_per_batch, small.group_size, small.max_episode_steps) == (2, 4, 8)
    recipe = TrainConfig(base_model="tiny", preset="recipe", backend="local")
    assert recipe.preset is Preset.RECIPE and recipe.group_size == 8
    assert recipe.max_assistant_tokens == 2048
    assert TrainConfig().preset is Preset.RECIPE and TrainConfig().max_episode_steps == 50
    local_cpu = EvalConfig(
        backend="local", device="cpu", base_model="some/model", output=Path("e.jsonl")
    )
    assert local_cpu.preset is Preset.CPU_SMALL and local_cpu.max_assistant_tokens == 64
    # the resolved preset is what a resumed run compares: same flags, same preset
    assert TrainConfig.model_validate(small.model_dump()) == small


def test_an_unreachable_model_fails_in_one_line_at_once(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    started = time.monotonic()
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = agentrl(
            tmp_path, "eval", "--env", "toy", "--backend", "local", "--device", "cpu",
            "--base-model", "someone/not-a-model", "--split", "valid_seen",
            "--limit-per-split", "1", "--output", str(tmp_path / "e.jsonl"),
        )  # fmt: skip
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert time.monotonic() - started < 60
    one_error_line(result, "someone/not-a-model", "cannot be reached")
    assert "Retrying" not in result.stderr


class _Crashing(ToyEnvGroup):
    """A toy group whose second step loses its database."""

    def __init__(self, task: TaskInfo, size: int) -> None:
        super().__init__(task, size)
        self.steps = 0

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        self.steps += 1
        if self.steps == 2:
            self._lose_connection()
        return await super().step(actions)

    def _lose_connection(self) -> None:
        raise ConnectionError("database connection lost")


async def test_an_env_error_record_says_where_it_was_raised(qwen_tokenizer: object) -> None:
    from agentrl.chat import ChatRenderer

    look = PROTOCOL.call_text("look")
    group = await rollout_group(
        toy_tasks(1, seed=0)[0],
        env_factory=_Crashing,
        sampler=ScriptedSampler(qwen_tokenizer, [[look, look, look]]),  # type: ignore[arg-type]
        renderer=ChatRenderer(qwen_tokenizer, PROTOCOL.tools),  # type: ignore[arg-type]
        protocol=PROTOCOL,
        config=RolloutConfig(group_size=1, retry_backoff=0.0),
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason.value == "env_error"
    error = trajectory.error or ""
    assert error.startswith("ConnectionError: database connection lost (at test_newcomer.py:")
    assert "in _lose_connection <- test_newcomer.py:" in error and "in step" in error


def test_describe_exception_without_a_traceback() -> None:
    assert describe_exception(ValueError("bad")) == "ValueError: bad"


async def test_the_env_checker_shows_where_branches_differ() -> None:
    long = "You are in the middle of a room. " * 6

    class Drifting(ToyEnvGroup):
        async def reset(self) -> list[EnvStep]:
            steps = await super().reset()
            odd = EnvStep(
                observation=long + "Looking quickly around you, you see a shelf 1.",
                admissible_actions=steps[1].admissible_actions,
            )
            return [EnvStep(observation=long + "Looking quickly around you, you see a bin 1.",
                            admissible_actions=steps[0].admissible_actions), odd]  # fmt: skip

    task = toy_tasks(1, seed=0)[0]
    with pytest.raises(EnvCheckError) as caught:
        await check_env_group(lambda: Drifting(task, 2))
    message = str(caught.value)
    assert "branch 1 differs from branch 0: observation at character 236" in message
    # both sides, with context before and after the first differing character
    assert "'. Looking quickly around you, you see a bin 1.' became " in message
    assert "became '. Looking quickly around you, you see a shelf 1.'" in message
    await check_env_group(lambda: make_toy_group(task, 2))  # an honest group passes


def test_progress_bars_never_warn_and_stay_out_of_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.delenv("AGENTRL_PROGRESS", raising=False)
        bar = progress_bar(total=3, desc="x", unit="game")
        assert bar.disable  # pytest's stderr is not a terminal
        bar.close()
        monkeypatch.setenv("AGENTRL_PROGRESS", "1")
        bar = progress_bar(total=3, desc="x", unit="game")
        assert not bar.disable and type(bar).__module__ == "tqdm.std"
        bar.close()


class _Ledger(FunctionEnv):
    """A tool whose database goes away (infrastructure) and one that rejects bad input."""

    def observation(self) -> str:
        return "Look up the balance of account 7, then submit it."

    @tool
    async def balance(self, account: int) -> str:
        """The balance of an account.

        Args:
            account: The account number.
        """
        if account == 7:
            raise ToolInfraError("database connection lost")
        raise ValueError(f"no account {account}")


async def test_an_infrastructure_error_of_a_tool_is_an_env_error(qwen_tokenizer: object) -> None:
    from agentrl.algo.advantages import score_groups
    from agentrl.chat import ChatRenderer
    from agentrl.config.plugins import make_estimator

    protocol = _Ledger.protocol("Use the tools.")
    calls = [protocol.call_text(ToolCall("balance", {"account": str(n)})) for n in (7, 8)]
    group = await rollout_group(
        TaskInfo("ledger"),
        env_factory=function_env_factory(lambda task: _Ledger()),
        sampler=ScriptedSampler(qwen_tokenizer, [[calls[0]], [calls[1], calls[1]]]),  # type: ignore[arg-type]
        renderer=ChatRenderer(qwen_tokenizer, protocol.tools),  # type: ignore[arg-type]
        protocol=protocol,
        config=RolloutConfig(group_size=2, max_env_steps=2, retry_backoff=0.0),
    )
    infra, policy = group.trajectories
    assert infra.stop_reason.value == "env_error"
    assert (infra.error or "").startswith("ToolInfraError: database connection lost (at ")
    assert "in balance" in (infra.error or "")
    assert policy.stop_reason.value != "env_error" and policy.invalid_actions == 2  # its fault
    (scored,) = score_groups(make_estimator("group_mean"), [group])
    assert set(scored.advantages.per_turn[0]) == {0.0}  # left out of the group's statistics
