"""The rollout engine: K branches of one game sampled concurrently, exact token prefixes.

`config` (`RolloutConfig`), `context` (`ContextPolicy`: `FullHistory`, `RecentTurns`,
`SummarizedTurns`), `turn` (one turn of one branch), `engine` (`rollout_group`,
`rollout_batch`), `players` (`model_player`, `ReplySampler`) and `replay`
(`RecordingSampler`, `ReplaySampler`: recorded episodes played again under another config).
"""

from agentrl.rollout.config import RolloutConfig, SamplerFailure
from agentrl.rollout.context import (
    ContextPolicy,
    FullHistory,
    RecentTurns,
    SummarizedTurns,
    SummaryPolicy,
)
from agentrl.rollout.engine import group_id_at, rollout_batch, rollout_group
from agentrl.rollout.players import PlayFn, ReplySampler, model_player
from agentrl.rollout.replay import RecordingSampler, ReplaySampler

__all__ = [
    "ContextPolicy",
    "FullHistory",
    "PlayFn",
    "RecentTurns",
    "RecordingSampler",
    "ReplaySampler",
    "ReplySampler",
    "RolloutConfig",
    "SamplerFailure",
    "SummarizedTurns",
    "SummaryPolicy",
    "group_id_at",
    "model_player",
    "rollout_batch",
    "rollout_group",
]
