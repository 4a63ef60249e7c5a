"""The learning recipe on any env (`agentrl.recipes.learning.learn`): a custom `FunctionEnv`
given as a factory + tasks + protocol, an env plug-in's `EnvSpec`, and the generic plain-command
protocol writing exactly the fetch protocol's messages. Tiny budgets (seconds each)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from pathlib import Path

import pytest

from agentrl.core.types import TaskInfo
from agentrl.tools import FunctionEnv, function_env_factory, tool

pytest.importorskip("torch")
pytest.importorskip("transformers")

WORDS = ("apple", "pear", "plum")


class Echo(FunctionEnv):
    """Say the word the task names (one of three listed): a task a model must read."""

    def __init__(self, task: TaskInfo) -> None:
        rng = random.Random(task.task_id)
        self.word = rng.choice(WORDS)
        self.order = tuple(rng.sample(WORDS, len(WORDS)))

    def observation(self) -> str:
        return f"The word is {self.word}."

    def admissible_actions(self) -> tuple[str, ...]:
        return () if self.done else tuple(f"say {w}" for w in self.order)

    @tool
    def say(self, word: str) -> str:
        """Say a word."""
        self.done, self.won = True, word == self.word
        return "Right." if self.won else "Wrong."


def _echo_env() -> object:
    from agentrl.recipes.learning_env import LearningEnv

    return LearningEnv(
        name="echo",
        env_factory=function_env_factory(Echo),
        train_tasks=tuple(TaskInfo(f"echo-{i}", split="train") for i in range(64)),
        held_out_tasks=tuple(TaskInfo(f"echo-held-{i}", split="valid_unseen") for i in range(16)),
        max_steps=1,
    )


def _say_the_word(prompt_text: str, rng: random.Random) -> str:
    """The optimal policy: the word the first message names."""
    return "say " + prompt_text.split("The word is ", 1)[1].split(".", 1)[0]


TINY = dict(
    updates=2,
    games_per_batch=2,
    group_size=4,
    eval_samples=4,
    eval_every=1,
    demos=64,
    sft_batch=16,
)


def _learn(env: object, setup: object, tmp: Path, **kwargs: object) -> object:
    import torch

    from agentrl.recipes.learning import learn

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return asyncio.run(learn(env, setup, tmp, **kwargs))  # type: ignore[arg-type]
    finally:
        torch.set_num_threads(threads)


def test_a_custom_env_learns_from_the_given_warm_start_policy(tmp_path: Path) -> None:
    """A factory + tasks + the default protocol; the warm start imitates the given policy, so
    the model reads the word before any RL (a random-policy warm start stays near 1/3)."""
    from agentrl.recipes.learning import LearningResult, LearningSetup

    setup = LearningSetup(**TINY, sft_steps=200)  # type: ignore[arg-type]
    result = _learn(_echo_env(), setup, tmp_path / "run", warm_policy=_say_the_word)
    assert isinstance(result, LearningResult)
    print(f"random {result.random_success:.2f} curve {[p.success for p in result.curve]}")
    assert result.env == "echo" and [p.update for p in result.curve] == [0, 1, 2]
    assert 0.1 <= result.random_success <= 0.6  # 1/3: the random valid policy's level
    assert result.before >= 0.8, result.curve  # it learnt the given policy, on held-out tasks
    assert len(result.train_success) == 2 and "random_success_exact" not in result.extra


def test_an_env_spec_runs_through_the_recipe(tmp_path: Path) -> None:
    """The vault plug-in's `EnvSpec` -> `LearningEnv` (its splits, plain commands over its
    listed actions) -> tokenizer trained on its own text -> warm start -> RL -> evaluation."""
    from agentrl.envs.toy.spec import VAULT_SPEC
    from agentrl.recipes.learning import LearningResult, LearningSetup
    from agentrl.recipes.learning_env import learning_env_from_spec
    from agentrl.recipes.tokenizer import env_tokenizer

    env = learning_env_from_spec(VAULT_SPEC, train_games=8, eval_games=4, max_steps=5)
    assert {t.split for t in env.train_tasks} == {"train"}
    assert {t.split for t in env.held_out_tasks} == {"valid_unseen"}
    tokenizer = env_tokenizer(env)
    assert len(tokenizer("press green")["input_ids"]) == 2  # its own words are whole tokens
    setup = replace(LearningSetup(**TINY, sft_steps=5), demos=12, max_steps=5)  # type: ignore[arg-type]
    result = _learn(env, setup, tmp_path / "run", tokenizer=tokenizer)
    assert isinstance(result, LearningResult) and result.env == "toy-vault"
    assert [p.update for p in result.curve] == [0, 1, 2]
    assert 0.0 <= result.random_success <= 0.75


def test_an_env_without_listed_actions_is_refused(tmp_path: Path) -> None:
    from agentrl.recipes.learning import LearningSetup
    from agentrl.recipes.learning_env import LearningEnv

    class Quiet(FunctionEnv):
        @tool
        def wait(self) -> str:
            """Wait."""
            return ""

    env = LearningEnv(
        name="quiet",
        env_factory=function_env_factory(lambda task: Quiet()),
        train_tasks=(TaskInfo("q-0"),),
        held_out_tasks=(TaskInfo("q-1"),),
    )
    with pytest.raises(ValueError, match="lists no admissible actions"):
        _learn(env, LearningSetup(**TINY), tmp_path)  # type: ignore[arg-type]


def test_the_plain_protocol_writes_the_fetch_protocols_messages() -> None:
    """`PlainCommandProtocol` on the fetch env gives `FetchCommands`' texts, turn by turn."""
    from agentrl.chat.tokenizers import build_qwen_tokenizer
    from agentrl.recipes.fetch import LearningSetup, fetch_learning_env
    from agentrl.recipes.learning_env import play, random_valid_policy
    from agentrl.testing import KeyedPolicySampler
    from agentrl.tools.command import PlainCommandProtocol

    fetch = fetch_learning_env(LearningSetup(eval_games=6))
    plain = replace(fetch, protocol=PlainCommandProtocol())
    qwen = build_qwen_tokenizer()
    policy = KeyedPolicySampler(qwen, random_valid_policy(fetch.protocol))

    def texts(env: object) -> list[str]:
        """Every trajectory's whole conversation, as rendered."""
        groups = asyncio.run(play(policy, qwen, env, fetch.held_out_tasks, 2, 9))  # type: ignore[arg-type]
        return [
            qwen.decode([*t.turns[-1].prompt_tokens, *t.turns[-1].completion_tokens])
            for g in groups
            for t in g.trajectories
        ]

    expected = texts(fetch)
    assert len(expected) == 12 and all("Available actions" in text for text in expected)
    assert texts(plain) == expected


def test_the_two_decision_fetch_task_needs_both_names_read() -> None:
    """`two_decisions` (the benchmark's `--task fetch2`): 3 objects x 3 receptacles, so the random
    valid policy wins 1/9; training and held-out games stay disjoint."""
    from agentrl.recipes.fetch import SMOKE, fetch_learning_env, two_decisions

    setup = two_decisions(SMOKE)
    env = fetch_learning_env(setup)
    assert (setup.objects, setup.receptacles) == (3, 3)
    assert env.random_success == pytest.approx(1 / 9)
    assert {t.task_id for t in env.train_tasks}.isdisjoint(t.task_id for t in env.held_out_tasks)
    assert len({t.task_id for t in env.train_tasks}) == setup.train_games
