"""The pycode env's `EnvSpec` (entry point `pycode` of the `agentrl.envs` group): seeded math
and algorithmic tasks, `run_python` / `submit` tools, the call-penalty reward and the solver
baseline; `agentrl generate --env pycode` writes task files."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.config import CommonConfig
from agentrl.config.envspec import Baseline, EnvSpec
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.rollout import PlayFn, RolloutConfig
from agentrl.tools import FunctionTools, ToolProtocol

__all__ = ["PYCODE_COUNTS", "SPEC"]

PYCODE_COUNTS = {"train": 400, "valid_seen": 60, "valid_unseen": 60}
"""Tasks per pycode split the command line plays (cut by `limit_per_split`)."""


def _tasks(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    progress: bool = False,
) -> list[TaskInfo]:
    from agentrl.envs.pycode.tasks import pycode_tasks

    found: list[TaskInfo] = []
    for split in splits:
        if split not in PYCODE_COUNTS:
            raise ValueError(f"unknown split {split!r}; expected one of {sorted(PYCODE_COUNTS)}")
        count = PYCODE_COUNTS[split]
        found.extend(pycode_tasks(split, min(count, limit_per_split or count)))
    return found


def _group_factory(config: CommonConfig) -> EnvGroupFactory:
    from agentrl.envs.pycode.env import PycodeOptions, pycode_group_factory

    return pycode_group_factory(PycodeOptions(sandbox=config.sandbox))


def _tool_protocol(config: CommonConfig) -> ToolProtocol:
    from agentrl.envs.pycode.env import pycode_tool_protocol

    return pycode_tool_protocol()


def _reward(config: CommonConfig) -> RewardFn | None:
    """`PycodeReward` where a `call_penalty` is set (else the configured reward)."""
    if config.call_penalty <= 0:
        return None
    from agentrl.envs.pycode.env import PycodeReward

    return PycodeReward(config.win_reward, config.invalid_penalty, config.call_penalty)


def _solver(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> PlayFn:
    from agentrl.envs.pycode.solver import solver_player

    if not isinstance(protocol, FunctionTools):
        raise ValueError("--policy solver plays pycode tasks only; use --env pycode")
    return solver_player(
        env_factory=env_factory,
        renderer=renderer,
        protocol=protocol,
        rollout=rollout,
        reward_fn=reward_fn,
    )


def _generate(args: argparse.Namespace) -> int:
    """`agentrl generate --env pycode`: task files `<split>.jsonl` under `--out`."""
    from agentrl.envs.pycode.tasks import write_tasks

    counts = {"train": args.train, "valid_seen": args.valid_seen, "valid_unseen": args.valid_unseen}
    counts = {split: n for split, n in counts.items() if n > 0}
    if not counts:
        raise ValueError("give at least one of --train, --valid-seen, --valid-unseen")
    for path in write_tasks(Path(args.out), counts):
        print(f"wrote {path}")
    return 0


SPEC = EnvSpec(
    name="pycode",
    summary="Python-interpreter agent: exact math and algorithmic tasks in a real sandbox",
    splits=tuple(PYCODE_COUNTS),
    tasks=_tasks,
    group_factory=_group_factory,
    tool_protocol=_tool_protocol,
    reward=_reward,
    baseline=Baseline(policy="solver", plays="pycode tasks", player=_solver),
    config_fields=("call_penalty", "win_reward", "invalid_penalty", "sandbox"),
    generate=_generate,
)
"""The pycode env."""
