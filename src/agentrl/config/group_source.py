"""`SpecGroupSource`: an installed env's group factory as a picklable `GroupSource`, and
`env_group_factory(config)`: the configured env's factory under the configured executor.

The process and Ray executors build the env's factory where its groups run; an env is named
there by its entry-point name and the run's config, which both pickle.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.config.common import CommonConfig
from agentrl.config.plugins import env_spec
from agentrl.core.env import EnvGroupFactory
from agentrl.executors import ExecutorKind, ExecutorOptions, Timeouts, executor_factory

__all__ = ["SpecGroupSource", "env_group_factory", "executor_options"]


@dataclass(frozen=True)
class SpecGroupSource:
    """Builds the group factory of the installed env `env` for `config` (where it is called)."""

    env: str
    config: CommonConfig

    def __call__(self) -> EnvGroupFactory:
        """`env_spec(env).group_factory(config)`."""
        return env_spec(self.env).group_factory(self.config)


def executor_options(config: CommonConfig) -> ExecutorOptions:
    """The executor the config's `--env-executor` and its flags describe."""
    return ExecutorOptions(
        kind=config.env_executor,
        max_groups=config.env_groups_in_flight,
        ray_address=config.ray_address,
        env_cpus=config.env_cpus,
        timeouts=Timeouts(step=config.env_step_timeout),
    )


def env_group_factory(config: CommonConfig) -> EnvGroupFactory:
    """The configured env's group factory: built here (inprocess), or an executor's factory
    whose groups run in worker processes or Ray actors. The caller closes it
    (`agentrl.core.env.close_env_factory`)."""
    source = SpecGroupSource(config.env, config)
    if config.env_executor is ExecutorKind.INPROCESS:
        return source()
    return executor_factory(source, executor_options(config))
