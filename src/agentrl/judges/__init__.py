"""Rewards from a judge model: rubric scores per trajectory (`Judge`) and relative scores of a
group's branches (`RankingJudge`), from any `Sampler` or an OpenAI-compatible endpoint.

Both are `GroupReward`s (`agentrl.algo.rewards`): pass one as `reward_fn` to `rollout_group`,
`rollout_batch` or the `Trainer`. A judgement that fails is the trajectory's `reward_error`
(left out of its group's statistics and counted), never a reward of 0. See docs/judges.md.
"""

from agentrl.judges.judge import DEFAULT_RUBRIC, Judge, JudgeAsker, parse_score, transcript
from agentrl.judges.models import JudgeModel, JudgeModelError, OpenAIJudgeModel, SamplerJudgeModel
from agentrl.judges.ranking import RankingJudge, parse_ranking

__all__ = [
    "DEFAULT_RUBRIC",
    "Judge",
    "JudgeAsker",
    "JudgeModel",
    "JudgeModelError",
    "OpenAIJudgeModel",
    "RankingJudge",
    "SamplerJudgeModel",
    "parse_ranking",
    "parse_score",
    "transcript",
]
