"""agentrl: typed multi-turn agentic reinforcement learning for tool-using LLM agents.

The public API is listed in `__all__`; plug-ins (ALFWorld, PyTRIO, the local torch backend)
live in `agentrl.envs.*` and `agentrl.backends.*` and import their optional dependencies
lazily.
"""

from agentrl import _legacy
from agentrl.algo.advantages import (
    AdvantageEstimator,
    Advantages,
    GroupAdvantages,
    GroupMean,
    GroupNormalized,
    LeaveOneOut,
)
from agentrl.algo.datums import Datum, build_datums, trajectory_to_datum
from agentrl.algo.rewards import GroupReward, RewardFn, RewardOutcome, WinMinusInvalid
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    KLEstimator,
    LossConfig,
    LossName,
    LossNormalisation,
    Sampler,
    SamplingParams,
    TrainingBackend,
)
from agentrl.chat import ChatRenderer, ChatTemplateError, HistoryRewriteError
from agentrl.chat.tool_calls import parse_tool_call
from agentrl.config import EvalConfig, TrainConfig
from agentrl.core.env import EnvAction, EnvGroup, EnvGroupFactory, command_of
from agentrl.core.types import (
    Completion,
    CompletionStop,
    EnvStep,
    Message,
    ParsedAction,
    ParseError,
    ParseErrorKind,
    StopReason,
    TaskInfo,
    TokenCounts,
    ToolCall,
    Trajectory,
    TrajectoryGroup,
    Turn,
    TurnStatus,
)
from agentrl.evaluation import EvalOutcome, evaluate, evaluate_tasks, model_player
from agentrl.rollout import RolloutConfig, rollout_batch, rollout_group
from agentrl.tools import (
    CommandTool,
    FunctionEnv,
    FunctionEnvGroup,
    FunctionTool,
    FunctionTools,
    StatusTexts,
    ToolArgumentError,
    ToolProtocol,
    ToolResult,
    function_env_factory,
    tool,
)
from agentrl.training.trainer import Trainer, TrainResult

_legacy.install()  # old module paths (`agentrl.training.trainer` ...) keep working

__version__ = "0.1.0"

__all__ = [
    "AdamParams",
    "AdvantageEstimator",
    "Advantages",
    "ChatRenderer",
    "ChatTemplateError",
    "CheckpointRef",
    "CommandTool",
    "Completion",
    "CompletionStop",
    "Datum",
    "EnvAction",
    "EnvGroup",
    "EnvGroupFactory",
    "EnvStep",
    "EvalConfig",
    "EvalOutcome",
    "ForwardBackwardResult",
    "FunctionEnv",
    "FunctionEnvGroup",
    "FunctionTool",
    "FunctionTools",
    "GroupAdvantages",
    "GroupMean",
    "GroupNormalized",
    "GroupReward",
    "HistoryRewriteError",
    "KLEstimator",
    "LeaveOneOut",
    "LossConfig",
    "LossName",
    "LossNormalisation",
    "Message",
    "ParseError",
    "ParseErrorKind",
    "ParsedAction",
    "RewardFn",
    "RewardOutcome",
    "RolloutConfig",
    "Sampler",
    "SamplingParams",
    "StatusTexts",
    "StopReason",
    "TaskInfo",
    "TokenCounts",
    "ToolArgumentError",
    "ToolCall",
    "ToolProtocol",
    "ToolResult",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingBackend",
    "Trajectory",
    "TrajectoryGroup",
    "Turn",
    "TurnStatus",
    "WinMinusInvalid",
    "__version__",
    "build_datums",
    "command_of",
    "evaluate",
    "evaluate_tasks",
    "function_env_factory",
    "model_player",
    "parse_tool_call",
    "rollout_batch",
    "rollout_group",
    "tool",
    "trajectory_to_datum",
]
