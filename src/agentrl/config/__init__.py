"""Training and evaluation configs: pydantic v2 models with the published recipe's defaults.

Every field has a one-line description (used by `agentrl train --help` / `agentrl eval --help`)
and unknown fields are rejected. Field names follow the familiar command-line flags
(`max_steps` is `--max-steps`, the number of training updates). Components chosen by name
(backend, estimator, reward, env) are built by `agentrl.config.plugins` or by their plug-in;
Python users may pass objects to the trainer instead.

`names` (the enums), `common` (`CommonConfig`), `train` (`TrainConfig`), `eval` (`EvalConfig`),
`envspec` (`EnvSpec`, what an env plug-in declares), `group_source` (`SpecGroupSource`, an
installed env's factory under the configured `--env-executor`), `plugins` (name -> factory lookup of
estimators and rewards, and of envs through the `agentrl.envs` entry points).
"""

from agentrl.config.common import CommonConfig
from agentrl.config.eval import EvalConfig
from agentrl.config.group_source import SpecGroupSource, env_group_factory
from agentrl.config.names import (
    BackendName,
    BehaviourLogprobs,
    EnvEngine,
    EnvName,
    EstimatorName,
    EvalPolicy,
    EvalSplit,
    Objective,
    RewardName,
    SamplerName,
    SandboxMode,
    StalePolicy,
    SwanLabMode,
    WandbMode,
)
from agentrl.config.train import TrainConfig

__all__ = [
    "BackendName",
    "BehaviourLogprobs",
    "CommonConfig",
    "EnvEngine",
    "EnvName",
    "EstimatorName",
    "EvalConfig",
    "EvalPolicy",
    "EvalSplit",
    "Objective",
    "RewardName",
    "SamplerName",
    "SandboxMode",
    "SpecGroupSource",
    "StalePolicy",
    "SwanLabMode",
    "TrainConfig",
    "WandbMode",
    "env_group_factory",
]
