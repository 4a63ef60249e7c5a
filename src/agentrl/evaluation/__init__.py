"""Evaluation: play validation games into one resumable JSONL file, then summarise it per split
and task type.

`run` (`evaluate_tasks`, the engine; `evaluate(config)`, what `agentrl eval` runs, with the
model or the env's baseline player) and `summary` (summary records, the run's label). The
players are the rollout engine's (`agentrl.rollout.players`), re-exported here.
"""

from agentrl._legacy import moved_name
from agentrl.evaluation.run import EvalOutcome, evaluate, evaluate_tasks
from agentrl.evaluation.summary import default_label
from agentrl.rollout.players import PlayFn, model_player

__all__ = [
    "EvalOutcome",
    "PlayFn",
    "default_label",
    "evaluate",
    "evaluate_tasks",
    "model_player",
]


def __getattr__(name: str) -> object:
    """`planner_player` moved into the ALFWorld plug-in (`agentrl.envs.alfworld.baseline`)."""
    return moved_name(__name__, name)
