"""The search env's `EnvSpec` (entry point `search` of the `agentrl.envs` group): multi-hop
questions over a BM25-indexed corpus, `search` / `answer` tools, the exact-match reward, the
solver and no-search baselines; `agentrl generate --env search` writes the corpus and question
files.

Without `--data-root` the env plays the generated world (seed 0); with `--data-root DIR` it
reads `DIR/corpus.jsonl` and `DIR/<split>.jsonl` (a user's own corpus and questions, or what
`agentrl generate --env search --out DIR --seed N` wrote).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.config import CommonConfig
from agentrl.config.envspec import Baseline, BaselineFactory, EnvSpec
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.envs.search.tasks import SEARCH_SPLITS, SearchData
from agentrl.rollout import PlayFn, RolloutConfig
from agentrl.tools import FunctionTools, ToolProtocol

__all__ = ["SPEC", "search_data"]


def search_data(config: CommonConfig) -> SearchData:
    """The corpus and questions a config names: `data_root`'s files, else the generated world."""
    from agentrl.envs.search.tasks import folder_data, generated_data

    if config.data_root is None:
        return generated_data(0)
    return folder_data(config.data_root)


def _tasks(
    config: CommonConfig,
    splits: Sequence[str],
    limit_per_split: int | None = None,
    progress: bool = False,
) -> list[TaskInfo]:
    data = search_data(config)
    return [task for split in splits for task in data.tasks(split, limit_per_split)]


def _group_factory(config: CommonConfig) -> EnvGroupFactory:
    from agentrl.envs.search.env import SearchFactory
    from agentrl.envs.search.index import corpus_index

    data = search_data(config)
    return SearchFactory(data.by_task_id(), corpus_index(data.corpus))


def _tool_protocol(config: CommonConfig) -> ToolProtocol:
    from agentrl.envs.search.env import search_tool_protocol

    return search_tool_protocol()


def _reward(config: CommonConfig) -> RewardFn:
    from agentrl.envs.search.scoring import SearchReward

    return SearchReward(config.win_reward, config.invalid_penalty)


def _function_tools(protocol: ToolProtocol, policy: str) -> FunctionTools:
    if not isinstance(protocol, FunctionTools):
        raise ValueError(f"--policy {policy} plays search questions only; use --env search")
    return protocol


def _baseline(policy: str) -> BaselineFactory:
    """The `BaselineFactory` of the search baseline `policy` (`solver`, `nosearch`)."""

    def player(
        *,
        env_factory: EnvGroupFactory,
        renderer: ChatRenderer,
        protocol: ToolProtocol,
        rollout: RolloutConfig,
        reward_fn: RewardFn,
    ) -> PlayFn:
        from agentrl.envs.search import solver

        build = solver.solver_player if policy == "solver" else solver.nosearch_player
        return build(
            env_factory=env_factory, renderer=renderer,
            protocol=_function_tools(protocol, policy), rollout=rollout, reward_fn=reward_fn,
        )  # fmt: skip

    return player


def _generate(args: argparse.Namespace) -> int:
    """`agentrl generate --env search`: `corpus.jsonl` and `<split>.jsonl` under `--out`
    (world `--seed`; every split in full unless `--train` / `--valid-seen` / `--valid-unseen`
    give counts)."""
    from agentrl.envs.search.tasks import generated_data, write_data

    asked = {"train": args.train, "valid_seen": args.valid_seen, "valid_unseen": args.valid_unseen}
    counts: dict[str, int | None] = {s: n for s, n in asked.items() if n > 0}
    data = generated_data(args.seed)
    for path in write_data(data, Path(args.out), counts or dict.fromkeys(SEARCH_SPLITS)):
        lines = sum(1 for _ in path.open(encoding="utf-8"))
        print(f"wrote {path} ({lines} lines)")
    return 0


SPEC = EnvSpec(
    name="search",
    summary="Search-R1 style QA: BM25 search over a generated corpus, multi-hop questions",
    splits=SEARCH_SPLITS,
    tasks=_tasks,
    group_factory=_group_factory,
    tool_protocol=_tool_protocol,
    reward=_reward,
    baselines=(
        Baseline(policy="solver", plays="search questions", player=_baseline("solver")),
        Baseline(policy="nosearch", plays="search questions", player=_baseline("nosearch")),
    ),
    config_fields=("data_root", "win_reward", "invalid_penalty"),
    generate=_generate,
)
"""The search env."""
