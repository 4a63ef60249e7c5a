"""Name-to-object registries: the estimators, reward functions and environments a config can
name.

Configs and the command line choose components by name; Python users may pass objects
instead. The estimator and reward registries are read-only mappings of the built-in factories
(no mutable global state): to use a custom estimator or reward, pass the object to the trainer
directly. Environments are plug-ins found by entry point: `env_spec(name)` loads the `EnvSpec`
a package names in the `agentrl.envs` group (the shipped envs are listed in `BUILTIN_ENVS` too,
for an agentrl whose installed metadata predates them).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentrl.algo.advantages import (
    AdvantageEstimator,
    GiGPO,
    GroupMean,
    GroupNormalized,
    LeaveOneOut,
)
from agentrl.algo.rewards import Reward, RewardFn, WinMinusInvalid
from agentrl.config.envspec import EnvSpec

__all__ = [
    "BUILTIN_ENVS",
    "ENTRY_POINT_GROUP",
    "ESTIMATORS",
    "REWARDS",
    "EnvSource",
    "EstimatorOptions",
    "RewardOptions",
    "UnknownEnvError",
    "check_env_name",
    "env_names",
    "env_source",
    "env_spec",
    "env_specs",
    "make_estimator",
    "make_reward",
]


@dataclass(frozen=True)
class RewardOptions:
    """Coefficients of the built-in reward functions."""

    win_reward: float = 1.0
    """Reward for a won episode."""
    invalid_penalty: float = 0.1
    """Penalty per invalid action (bad tool-call format or non-admissible action)."""


@dataclass(frozen=True)
class EstimatorOptions:
    """Hyper-parameters of the built-in advantage estimators."""

    normalized_eps: float = 1e-6
    """`group_normalized`: added to the group std before dividing."""
    gigpo_gamma: float = 0.95
    """`gigpo`: discount of the per-turn step returns."""
    gigpo_omega: float = 1.0
    """`gigpo`: weight of the step-level advantage."""
    gigpo_normalize_step: bool = False
    """`gigpo`: divide step advantages by their anchor group's std."""


def _win_minus_invalid(options: RewardOptions) -> RewardFn:
    return WinMinusInvalid(win_reward=options.win_reward, invalid_penalty=options.invalid_penalty)


REWARDS: Mapping[str, Callable[[RewardOptions], RewardFn]] = MappingProxyType(
    {"win_minus_invalid": _win_minus_invalid}
)
"""Built-in reward functions by name."""


def _gigpo(options: EstimatorOptions, reward_fn: Reward) -> AdvantageEstimator:
    return GiGPO(
        gamma=options.gigpo_gamma,
        omega=options.gigpo_omega,
        normalize_step=options.gigpo_normalize_step,
        reward_fn=reward_fn,
    )


ESTIMATORS: Mapping[str, Callable[[EstimatorOptions, Reward], AdvantageEstimator]] = (
    MappingProxyType(
        {
            "group_mean": lambda options, reward_fn: GroupMean(),
            "group_normalized": lambda options, reward_fn: GroupNormalized(
                eps=options.normalized_eps
            ),
            "leave_one_out": lambda options, reward_fn: LeaveOneOut(),
            "gigpo": _gigpo,
        }
    )
)
"""Built-in advantage estimators by name (the reward function feeds step-level ones)."""


def _unknown(kind: str, name: str, known: Mapping[str, object]) -> ValueError:
    return ValueError(
        f"unknown {kind} {name!r}; choose one of {', '.join(sorted(known))} "
        f"(or pass your own {kind} object in Python)"
    )


def make_reward(name: str, options: RewardOptions | None = None) -> RewardFn:
    """The built-in reward function called `name`."""
    try:
        factory = REWARDS[name]
    except KeyError:
        raise _unknown("reward", name, REWARDS) from None
    return factory(options or RewardOptions())


def make_estimator(
    name: str, options: EstimatorOptions | None = None, reward_fn: Reward | None = None
) -> AdvantageEstimator:
    """The built-in advantage estimator called `name`."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        raise _unknown("estimator", name, ESTIMATORS) from None
    return factory(options or EstimatorOptions(), reward_fn or WinMinusInvalid())


# -- environments, by entry point ---------------------------------------------------------------

ENTRY_POINT_GROUP = "agentrl.envs"
"""The entry-point group env packages register their `EnvSpec` in."""

BUILTIN_ENVS: Mapping[str, str] = MappingProxyType(
    {
        "agent": "agentrl.envs.agent.spec:SPEC",
        "alfworld": "agentrl.envs.alfworld.spec:SPEC",
        "pycode": "agentrl.envs.pycode.spec:SPEC",
        "search": "agentrl.envs.search.spec:SPEC",
        "toy": "agentrl.envs.toy.spec:SPEC",
    }
)
"""The envs agentrl ships (also declared as entry points in its `pyproject.toml`)."""

_HOW_TO_REGISTER = (
    "A package registers an env by naming its EnvSpec (agentrl.config.envspec.EnvSpec) in "
    'its pyproject.toml: [project.entry-points."agentrl.envs"] myenv = "mypkg.spec:SPEC", '
    "then installing the package; `agentrl envs` lists the installed envs"
)


class UnknownEnvError(ValueError):
    """No installed env has this name (or its entry point does not name an `EnvSpec`)."""


@dataclass(frozen=True)
class EnvSource:
    """Where an env comes from: its entry point and the distribution that declares it."""

    name: str
    value: str
    """`module:attribute` of its `EnvSpec`."""
    distribution: str
    """`name version` of the declaring distribution, or `agentrl (built in)`."""


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, point)  # the first on sys.path wins, as for imports
    for name, value in BUILTIN_ENVS.items():
        if name not in found:
            found[name] = importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)
    return found


def env_names() -> tuple[str, ...]:
    """The names of the installed envs, sorted (reads entry points; imports no env)."""
    return tuple(sorted(_entry_points()))


def _unknown_env(name: str) -> UnknownEnvError:
    return UnknownEnvError(
        f"unknown env {name!r}; installed envs: {', '.join(env_names())}. {_HOW_TO_REGISTER}"
    )


def check_env_name(name: str) -> str:
    """`name` if an env of that name is installed, else `UnknownEnvError` (imports no env)."""
    if name not in _entry_points():
        raise _unknown_env(name)
    return name


def env_source(name: str) -> EnvSource:
    """Where the env `name` comes from (`UnknownEnvError` if none is installed)."""
    point = _entry_points().get(name)
    if point is None:
        raise _unknown_env(name)
    dist = point.dist
    where = "agentrl (built in)" if dist is None else f"{dist.name} {dist.version}"
    return EnvSource(name, point.value, where)


def env_spec(name: str) -> EnvSpec:
    """The `EnvSpec` of the installed env `name` (`UnknownEnvError` lists the installed ones)."""
    point = _entry_points().get(str(name))
    if point is None:
        raise _unknown_env(str(name))
    spec = point.load()
    if not isinstance(spec, EnvSpec):
        raise UnknownEnvError(
            f"the {ENTRY_POINT_GROUP} entry point {name!r} = {point.value!r} names a "
            f"{type(spec).__name__}, not an EnvSpec; {_HOW_TO_REGISTER}"
        )
    if spec.name != name:
        raise UnknownEnvError(
            f"the {ENTRY_POINT_GROUP} entry point {name!r} = {point.value!r} names the EnvSpec "
            f"of {spec.name!r}; the entry point and EnvSpec.name must agree"
        )
    return spec


def env_specs() -> tuple[EnvSpec, ...]:
    """Every installed env's `EnvSpec`, by name."""
    return tuple(env_spec(name) for name in env_names())
