"""ALFWorld plug-in: game discovery, offline generation, K-branch EnvGroups, planner baseline.

Importing this package does not import TextWorld or alfworld; they are loaded (with a clear
error naming the `alfworld` extra when missing) when a game is generated or played.
"""

from agentrl.envs.alfworld.compat import apply_textworld_compat
from agentrl.envs.alfworld.data import (
    OFFICIAL_COUNTS,
    SPLITS,
    TASK_TYPES,
    AlfworldDataError,
    GameExample,
    batch_at,
    count_games,
    default_data_root,
    find_games,
    iter_batches,
    resolve_data_root,
    shuffled_games,
)
from agentrl.envs.alfworld.engine import ENGINES, AlfworldEngine, EngineStep, TextWorldEngine
from agentrl.envs.alfworld.expert import ExpertTask, expert_plan, plan_for_game
from agentrl.envs.alfworld.generate import GenerationReport, generate_games, verify_game
from agentrl.envs.alfworld.group import (
    AlfworldEnvGroup,
    AlfworldEnvOptions,
    AlfworldGroupFactory,
    alfworld_group_factory,
    make_alfworld_group,
)
from agentrl.envs.alfworld.planner import (
    BranchResult,
    GameResult,
    PlannerPolicy,
    play_group,
    play_tasks,
)
from agentrl.envs.alfworld.pool import EnvWorkerPool

__all__ = [
    "ENGINES",
    "OFFICIAL_COUNTS",
    "SPLITS",
    "TASK_TYPES",
    "AlfworldDataError",
    "AlfworldEngine",
    "AlfworldEnvGroup",
    "AlfworldEnvOptions",
    "AlfworldGroupFactory",
    "BranchResult",
    "EngineStep",
    "EnvWorkerPool",
    "ExpertTask",
    "GameExample",
    "GameResult",
    "GenerationReport",
    "PlannerPolicy",
    "TextWorldEngine",
    "alfworld_group_factory",
    "apply_textworld_compat",
    "batch_at",
    "count_games",
    "default_data_root",
    "expert_plan",
    "find_games",
    "generate_games",
    "iter_batches",
    "make_alfworld_group",
    "plan_for_game",
    "play_group",
    "play_tasks",
    "resolve_data_root",
    "shuffled_games",
    "verify_game",
]
