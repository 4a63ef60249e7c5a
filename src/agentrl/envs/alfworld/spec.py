"""The ALFWorld env's `EnvSpec` (entry point `alfworld` of the `agentrl.envs` group): games from
the data root, K-branch groups (fast or TextWorld engine, worker pool), one command tool, the
planner baseline; `agentrl generate` writes verified games."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.config import CommonConfig
from agentrl.config.envspec import Baseline, EnvSpec
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.envs.alfworld.data import SPLITS
from agentrl.rollout import PlayFn, RolloutConfig
from agentrl.tools import CommandTool, ToolProtocol

__all__ = ["SPEC"]


def _tasks(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    progress: bool = False,
) -> list[TaskInfo]:
    """Games from the data root (`--data-root`, `$ALFWORLD_DATA`, the alfworld cache); a missing
    root raises `AlfworldDataError` saying how to get or generate games."""
    from agentrl.envs.alfworld.data import AlfworldDataError, find_games

    games = find_games(config.data_root, splits=tuple(splits), progress=progress)
    tasks: list[TaskInfo] = []
    for split in splits:
        chosen = [g.to_task() for g in games if g.split == split]
        if not chosen:
            raise AlfworldDataError(
                f"no {split} games under the data root "
                f"{config.data_root or '(default)'}; generate some with `agentrl generate "
                f"--out DIR --{split.replace('_', '-')} 12` or choose another split"
            )
        tasks.extend(chosen[:limit_per_split] if limit_per_split else chosen)
    return tasks


def _group_factory(config: CommonConfig) -> EnvGroupFactory:
    from agentrl.envs.alfworld.group import AlfworldEnvOptions, alfworld_group_factory
    from agentrl.envs.alfworld.pool import EnvWorkerPool

    options = AlfworldEnvOptions(max_steps=config.max_episode_steps, engine=config.env_engine.value)
    pool = None if config.env_workers == 0 else EnvWorkerPool(config.env_workers)
    return alfworld_group_factory(options, pool)


def _tool_protocol(config: CommonConfig) -> ToolProtocol:
    from agentrl.envs.alfworld.tools import alfworld_tool_protocol

    return alfworld_tool_protocol(include_admissible=config.show_admissible)


def _planner(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> PlayFn:
    from agentrl.envs.alfworld.baseline import planner_player

    if not isinstance(protocol, CommandTool):
        raise ValueError("--policy planner plays ALFWorld games only; use --env alfworld")
    return planner_player(
        env_factory=env_factory,
        renderer=renderer,
        protocol=protocol,
        rollout=rollout,
        reward_fn=reward_fn,
    )


def _task_types(text: str | None) -> tuple[str, ...]:
    """`--task-types`: a comma-separated list (None: all six)."""
    from agentrl.envs.alfworld.data import TASK_TYPES

    if text is None:
        return TASK_TYPES
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _generate(args: argparse.Namespace) -> int:
    """`agentrl generate` (`--env alfworld`): verified games under `--out`."""
    from agentrl.envs.alfworld.data import TASK_TYPES
    from agentrl.envs.alfworld.generate import generate_games

    if not 0 < args.timeout < float("inf"):
        raise ValueError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    report = generate_games(
        args.out,
        train=args.train,
        valid_seen=args.valid_seen,
        valid_unseen=args.valid_unseen,
        seed=args.seed,
        task_types=_task_types(args.task_types),
        max_receptacles=args.max_receptacles,
        workers=args.workers,
        timeout=args.timeout,
        progress=not args.quiet,
        verify_engine=args.verify_engine,
    )
    counts = report.counts()
    width = max(len(t) for t in TASK_TYPES)
    print(
        f"wrote {len(report.games)} games to {report.root} in {report.seconds:.1f}s "
        f"({report.discarded} candidates discarded)"
    )
    for split, per_type in counts.items():
        print(f"  {split} ({sum(per_type.values())})")
        for task_type, n in per_type.items():
            print(f"    {task_type:<{width}}  {n}")
    requested = args.train + args.valid_seen + args.valid_unseen
    if len(report.games) < requested:
        print(
            f"error: only {len(report.games)} of {requested} games passed verification; "
            "last failures:\n  " + "\n  ".join(report.failures[-5:]),
            file=sys.stderr,
        )
        return 1
    print(f"use them with: find_games({str(report.root)!r})  or  ALFWORLD_DATA={report.root}")
    return 0


SPEC = EnvSpec(
    name="alfworld",
    summary="ALFWorld household tasks (text-only TextWorld/PDDL games), one command tool",
    splits=tuple(SPLITS),
    tasks=_tasks,
    group_factory=_group_factory,
    tool_protocol=_tool_protocol,
    baseline=Baseline(policy="planner", plays="ALFWorld games", player=_planner),
    config_fields=(
        "data_root",
        "env_engine",
        "env_workers",
        "max_episode_steps",
        "show_admissible",
    ),
    generate=_generate,
)
"""The ALFWorld env."""
