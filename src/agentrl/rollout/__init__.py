"""The rollout engine: K branches of one game sampled concurrently, exact token prefixes.

`config` (`RolloutConfig`), `context` (`ContextPolicy`: `FullHistory`, `RecentTurns`,
`SummarizedTurns`), `turn` (one turn of one branch), `engine` (`rollout_group`,
`rollout_batch`), `players` (`model_player`, `ReplySampler`, `keyed_rollout`) and `replay`
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
from agentrl.rollout.players import PlayFn, ReplySampler, keyed_rollout, model_player
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
    "keyed_rollout",
    "model_player",
    "rollout_batch",
    "rollout_group",
]
