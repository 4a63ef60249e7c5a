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

import random
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.advantages import GroupMean
from agentrl.backends.base import AdamParams, LossConfig, LossName, SamplingParams
from agentrl.backends.local import LocalBackend, LoraSpec
from agentrl.chat import ChatRenderer
from agentrl.datums import build_datums, trajectory_to_datum
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.testing import PolicySampler
from agentrl.tools import ToolResult
from agentrl.types import (
    EnvStep,
    JsonObject,
    Message,
    ParsedAction,
    ParseErrorKind,
    TaskInfo,
    TrajectoryGroup,
)

ACTIONS_HEADING = "Available actions (copy one exactly):"


class PlainCommands:
    """A `ToolProtocol` whose reply is one command, verbatim (the toy's texts otherwise)."""

    tools: tuple[JsonObject, ...] = ()
    system_prompt = "Reply with one command copied exactly from the available actions."

    def __init__(self) -> None:
        self._toy = toy_tool_protocol()

    def initial_messages(self, task: TaskInfo, first_step: EnvStep, max_env_steps: int):
        """The toy's first user message under a plain-command system prompt."""
        _, user = self._toy.initial_messages(task, first_step, max_env_steps)
        return [Message(role="system", content=self.system_prompt), user]

    def parse(self, assistant_text: str, *, truncated: bool = False) -> ParsedAction:
        """The whole reply is the command; a cut, empty or multi-line reply is invalid."""
        text = " ".join(assistant_text.split()).lower()
        if truncated:
            return ParsedAction.failure(ParseErrorKind.TRUNCATED, "reply cut at the limit")
        if not text:
            return ParsedAction.failure(ParseErrorKind.EMPTY_ACTION, "empty reply")
        if "\n" in assistant_text.strip():
            return ParsedAction.failure(ParseErrorKind.MULTILINE_ACTION, "several lines")
        return ParsedAction(action=text)

    def tool_message(self, result: ToolResult) -> Message:
        """The toy's tool message (status, step counter, observation, actions)."""
        return self._toy.tool_message(result)


def uniform_demo_policy(seed: int):
    """Replies with a uniformly random command from the prompt's last list of actions."""
    rng = random.Random(seed)

    def policy(prompt_text: str) -> str:
        block = prompt_text.rsplit(ACTIONS_HEADING, 1)[-1]
        actions = re.findall(r"^([a-z][^\n<]*)", block, flags=re.MULTILINE)
        return rng.choice(actions)

    return policy


@dataclass(frozen=True)
class Setup:
    """One learning experiment (all seeds fixed)."""

    env_steps: int
    sft_steps: int
    updates: int
    games_per_update: int
    group_size: int
    rl_learning_rate: float
    demos: int = 8
    sft_learning_rate: float = 5e-3
    eval_games: int = 8
    eval_group: int = 8
    seed: int = 0


SINGLE_STEP = Setup(
    env_steps=1, sft_steps=25, updates=12, games_per_update=8, group_size=8, rl_learning_rate=4e-3
)
MULTI_TURN = Setup(
    env_steps=4, sft_steps=25, updates=14, games_per_update=4, group_size=8, rl_learning_rate=3e-3
)


@dataclass(frozen=True)
class Summary:
    """Mean reward and invalid-action rate of a batch of groups."""

    reward: float
    invalid_per_turn: float
    trajectories: int

    @classmethod
    def of(cls, groups: list[TrajectoryGroup]) -> Summary:
        """Summarise rolled-out groups."""
        trajectories = [t for g in groups for t in g.trajectories]
        turns = [turn for t in trajectories for turn in t.turns]
        return cls(
            reward=float(np.mean([t.reward for t in trajectories])),
            invalid_per_turn=float(np.mean([turn.invalid for turn in turns])),
            trajectories=len(trajectories),
        )


async def run_grpo(setup: Setup, tokenizer: Any) -> tuple[Summary, Summary, list[Summary]]:
    """Warm start, evaluate, GRPO for `setup.updates` updates, evaluate again."""
    protocol = PlainCommands()
    renderer = ChatRenderer(tokenizer)

    def config(group: int, seed: int | None = None) -> RolloutConfig:
        return RolloutConfig(
            group_size=group,
            max_env_steps=setup.env_steps,
            max_assistant_tokens=16,
            max_trajectory_tokens=1500,
            sampling=SamplingParams(temperature=1.0, seed=seed),
        )

    async def rollouts(sampler: Any, tasks: list[TaskInfo], cfg: RolloutConfig):
        return await rollout_batch(
            tasks,
            env_factory=make_toy_group,
            sampler=sampler,
            renderer=renderer,
            protocol=protocol,
            config=cfg,
        )

    demo_sampler = PolicySampler(tokenizer, uniform_demo_policy(setup.seed))
    demo_groups = await rollouts(demo_sampler, toy_tasks(setup.demos, seed=1000), config(1))
    demos = [
        trajectory_to_datum(t, [1.0] * len(t.turns)) for g in demo_groups for t in g.trajectories
    ]
    backend = LocalBackend.tiny(
        tokenizer, seed=setup.seed, device="cpu", lora=LoraSpec(rank=32, alpha=64)
    )
    for _ in range(setup.sft_steps):
        await backend.forward_backward(demos, LossName.CROSS_ENTROPY, LossConfig())
        await backend.optim_step(AdamParams(learning_rate=setup.sft_learning_rate))
    sampler = await backend.sampler()
    held_out = toy_tasks(setup.eval_games, seed=5000)
    evaluation = config(setup.eval_group, seed=123)
    before = Summary.of(await rollouts(sampler, held_out, evaluation))
    history = []
    adam = AdamParams(learning_rate=setup.rl_learning_rate, grad_clip_norm=1.0)
    for update in range(setup.updates):
        tasks = toy_tasks(setup.games_per_update, seed=update * setup.games_per_update)
        groups = await rollouts(sampler, tasks, config(setup.group_size))
        history.append(Summary.of(groups))
        datums = build_datums(groups, GroupMean().estimate(groups))
        if datums:
            await backend.forward_backward(datums, LossName.PPO, LossConfig(0.8, 1.2))
            await backend.optim_step(adam)
    after = Summary.of(await rollouts(sampler, held_out, evaluation))
    return before, after, history


async def test_grpo_raises_reward_single_step_toy(qwen_tokenizer) -> None:
    """Default variant (~60 s): one command per episode; reward in [-0.1, 0]."""
    start = time.perf_counter()
    before, after, history = await run_grpo(SINGLE_STEP, qwen_tokenizer)
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
    before, after, _ = await run_grpo(MULTI_TURN, qwen_tokenizer)
    elapsed = time.perf_counter() - start
    print(f"multi-turn: {before} -> {after} in {elapsed:.0f}s")
    assert before.invalid_per_turn > 0.5
    assert after.reward - before.reward >= 0.15
    assert after.invalid_per_turn <= before.invalid_per_turn - 0.4
