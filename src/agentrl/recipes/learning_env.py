"""An env as the learning recipe sees it (`LearningEnv`), built from an env factory and tasks
or from an `EnvSpec` (`learning_env_from_spec`), and the recipe's rollouts on it (`play`).

The recipe (`agentrl.recipes.learning.learn`) needs of an env only what this record holds: how
to build groups, the tasks it trains on, evaluates on (held out), plays demonstrations on and
trains its tokenizer on, the protocol the model plays through and the episode's budgets. The
default protocol is `PlainCommandProtocol` (the reply is the command, for small from-scratch
models); it needs an env that lists its admissible actions (a text env, or a `FunctionEnv` with
`admissible_actions()`), and so does the uniformly random valid policy (`random_valid_policy`)
that the warm start imitates and the random baseline plays.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.algo.rewards import RewardFn
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.config.envspec import EnvSpec
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo, TrajectoryGroup
from agentrl.envs.toy.plain import ACTIONS_HEADING, uniform_command
from agentrl.rollout import RolloutConfig, rollout_batch
from agentrl.tools import CommandTool, ToolProtocol
from agentrl.tools.command import PlainCommandProtocol

__all__ = [
    "EnvWrapper",
    "KeyedPolicy",
    "LearningEnv",
    "check_lists_actions",
    "config_env_name",
    "learning_env_from_spec",
    "play",
    "random_valid_policy",
]

EnvWrapper = Callable[[EnvGroupFactory], EnvGroupFactory]
"""Wraps the env factory of every rollout of a run (tests inject delays with it)."""

KeyedPolicy = Callable[[str, random.Random], str]
"""`policy(prompt_text, rng) -> reply`, `rng` keyed by the request (`KeyedPolicySampler`)."""


@dataclass(frozen=True)
class LearningEnv:
    """What the learning recipe needs of an env: groups, tasks per role, protocol, budgets."""

    name: str
    """A label for reports (`toy-fetch`)."""
    env_factory: EnvGroupFactory
    train_tasks: tuple[TaskInfo, ...]
    """The tasks RL trains on (the Trainer's)."""
    held_out_tasks: tuple[TaskInfo, ...]
    """The tasks success is measured on (never trained on)."""
    protocol: ToolProtocol = field(default_factory=PlainCommandProtocol)
    """How the model acts (default: the reply is the command)."""
    demo_tasks: tuple[TaskInfo, ...] = ()
    """The tasks the warm start's demonstrations play (default: the training tasks)."""
    corpus_tasks: tuple[TaskInfo, ...] = ()
    """The tasks whose rendered random play trains the tokenizer (default: the training ones)."""
    max_steps: int = 3
    """Replies per episode."""
    max_reply_tokens: int = 12
    max_trajectory_tokens: int = 1024
    reward_fn: RewardFn | None = None
    """The env's reward (None: `WinMinusInvalid`)."""
    random_success: float | None = None
    """The random valid policy's exact success rate, when known."""

    def __post_init__(self) -> None:
        if not self.train_tasks or not self.held_out_tasks:
            raise ValueError(f"learning env {self.name!r} needs training and held-out tasks")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    @property
    def demonstration_tasks(self) -> tuple[TaskInfo, ...]:
        """`demo_tasks`, else the training tasks."""
        return self.demo_tasks or self.train_tasks

    @property
    def tokenizer_tasks(self) -> tuple[TaskInfo, ...]:
        """`corpus_tasks`, else the first 96 training tasks."""
        return self.corpus_tasks or self.train_tasks[:96]

    def renderer(self, tokenizer: Any) -> ChatRenderer:
        """A renderer of `tokenizer` with the protocol's tools."""
        tools = tuple(self.protocol.tools)
        return ChatRenderer(tokenizer, tools) if tools else ChatRenderer(tokenizer)


def random_valid_policy(protocol: ToolProtocol) -> KeyedPolicy:
    """The uniformly random valid policy for `protocol`: a command drawn from the prompt's last
    action list, written verbatim (`PlainCommandProtocol` and the fetch protocol) or as the
    protocol's call (`CommandTool`). A protocol whose prompts list no actions (`FunctionTools`)
    has none: give the recipe a warm-start policy instead (`learn(..., warm_policy=...)`)."""
    if isinstance(protocol, CommandTool):
        if not protocol.include_admissible or protocol.actions_heading != ACTIONS_HEADING:
            raise ValueError("the random valid policy reads the actions a CommandTool lists")

        def call(prompt_text: str, rng: random.Random) -> str:
            return protocol.call_text(uniform_command(prompt_text, rng))

        return call
    if isinstance(protocol, PlainCommandProtocol) and protocol.actions_heading != ACTIONS_HEADING:
        raise ValueError(f"the random valid policy reads actions listed as {ACTIONS_HEADING!r}")
    if protocol.tools:
        raise ValueError(
            f"{type(protocol).__name__} prompts list no actions, so there is no random valid "
            "policy: use the plain-command protocol or pass warm_policy"
        )
    return uniform_command


async def play(
    sampler: Sampler,
    tokenizer: Any,
    env: LearningEnv,
    tasks: Sequence[TaskInfo],
    group: int,
    seed: int,
    wrap_env: EnvWrapper | None = None,
) -> list[TrajectoryGroup]:
    """`group` trajectories of each task of `tasks`, sampled by `sampler` at temperature 1
    under the env's budgets (`seed`: the base of the rollout engine's keyed per-request seeds;
    `wrap_env` wraps the env factory, e.g. to delay steps in a test)."""
    config = RolloutConfig(
        group_size=group,
        max_env_steps=env.max_steps,
        max_assistant_tokens=env.max_reply_tokens,
        max_trajectory_tokens=env.max_trajectory_tokens,
        sampling=SamplingParams(temperature=1.0, seed=seed),
    )
    factory = env.env_factory if wrap_env is None else wrap_env(env.env_factory)
    return await rollout_batch(
        list(tasks),
        env_factory=factory,
        sampler=sampler,
        renderer=env.renderer(tokenizer),
        protocol=env.protocol,
        config=config,
        max_concurrent_groups=len(tasks),
    )


async def check_lists_actions(env: LearningEnv) -> None:
    """Raise ValueError unless the env's first training task lists admissible actions (what
    the plain-command protocol shows and the random valid policy draws from)."""
    group = env.env_factory(env.train_tasks[0], 1)
    try:
        first = (await group.reset())[0]
    finally:
        await group.close()
    if not first.admissible_actions:
        raise ValueError(
            f"env {env.name!r} lists no admissible actions (EnvStep.admissible_actions), so it "
            "has no random valid policy for the warm start; list them (a FunctionEnv's "
            "admissible_actions()) to run the learning recipe on it"
        )


def config_env_name(name: str) -> str:
    """`name` when an env of that name is installed, else `toy` (a config's `env` must name an
    installed env; the recipe hands its Trainer the factory itself, so the label is all it is)."""
    from agentrl.config.plugins import UnknownEnvError, check_env_name

    try:
        return check_env_name(name)
    except UnknownEnvError:
        return "toy"


def _split_tasks(spec: EnvSpec, config: Any, split: str, count: int) -> tuple[TaskInfo, ...]:
    tasks = tuple(spec.tasks(config, [split], limit_per_split=count))
    if not tasks:
        raise ValueError(f"env {spec.name!r} has no tasks in split {split!r}")
    return tasks


def learning_env_from_spec(
    spec: EnvSpec,
    *,
    train_games: int,
    eval_games: int,
    max_steps: int,
    plain: bool = True,
    held_out_split: str | None = None,
    max_reply_tokens: int = 12,
    max_trajectory_tokens: int = 1024,
) -> LearningEnv:
    """The `LearningEnv` of an env plug-in: `train_games` tasks of its `train` split,
    `eval_games` of `held_out_split` (default: `valid_unseen`, else its last other split), its
    group factory and reward, and the plain-command protocol (`plain`) or its own tools."""
    from agentrl.config import CommonConfig

    others = [s for s in spec.splits if s != "train"]
    held_out = held_out_split or ("valid_unseen" if "valid_unseen" in others else None)
    held_out = held_out or (others[-1] if others else None)
    if "train" not in spec.splits or held_out is None:
        raise ValueError(
            f"env {spec.name!r} needs a 'train' split and a held-out one, has {spec.splits}"
        )
    config = CommonConfig.model_validate(
        {"env": config_env_name(spec.name), "max_episode_steps": max_steps}
    )
    return LearningEnv(
        name=spec.name,
        env_factory=spec.group_factory(config),
        train_tasks=_split_tasks(spec, config, "train", train_games),
        held_out_tasks=_split_tasks(spec, config, held_out, eval_games),
        protocol=PlainCommandProtocol() if plain else spec.tool_protocol(config),
        max_steps=max_steps,
        max_reply_tokens=max_reply_tokens,
        max_trajectory_tokens=max_trajectory_tokens,
        reward_fn=spec.reward_for(config),
    )
