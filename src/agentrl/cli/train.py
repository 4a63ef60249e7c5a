"""`agentrl train`: train a LoRA policy with group rollouts and a PPO loss (one flag per field of
`TrainConfig`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any

from agentrl.cli.args import Subparsers, add_config_arguments, config_from_args
from agentrl.config import TrainConfig
from agentrl.config.names import DistillSignal, Objective
from agentrl.core.env import close_env_factory
from agentrl.core.types import TaskInfo
from agentrl.training.checkpoints import CheckpointInfo
from agentrl.training.interrupts import run_until_signal

__all__ = ["add_parser", "add_rft_parser", "interrupted", "run", "run_rft"]


async def _train(config: TrainConfig) -> int:
    from agentrl.config.presets import preset_line
    from agentrl.store.lock import check_not_in_use
    from agentrl.training import recipe
    from agentrl.training.build import distributed_for, rank_config
    from agentrl.training.checkpoints import check_run_dir
    from agentrl.training.trainer import Trainer

    rank = distributed_for(config)  # torchrun: this rank (None: one process)
    main_rank = rank is None or rank.is_main
    config = rank_config(config)  # ranks > 0 keep their run files apart
    print(preset_line(config))
    check_not_in_use(config.run_dir, what="run folder", folder=True)
    check_run_dir(config)
    if config.objective is Objective.OPSD:
        privileged_context(config)  # before anything is loaded
    recipe.check_credentials(config)
    tasks = recipe.tasks_for(config, [config.train_split], progress=True)
    print(f"{len(tasks)} training games ({config.env}, split {config.train_split})")
    tokenizer = recipe.tokenizer_for(config)
    if config.agent is not None:
        return await _train_agent(config, tasks, tokenizer)
    protocol = recipe.tool_protocol_for(config)
    backend = await recipe.training_backend_for(config, tokenizer)
    env_factory = recipe.env_factory_for(config)  # built here, so closed here
    try:
        renderer = recipe.renderer_for(tokenizer, protocol, config)
        trainer = Trainer(
            config=config,
            backend=backend,
            env_factory=env_factory,
            tasks=tasks,
            renderer=renderer,
            protocol=protocol,
            progress=main_rank,
            **await _objective(config, tokenizer, backend, renderer),
        )
        return await _run(trainer, config)
    finally:
        await close_env_factory(env_factory)
        await backend.close()  # built here, so closed here


def privileged_context(config: TrainConfig) -> Callable[[TaskInfo], str | None]:
    """The env's privileged context for `--objective opsd` (ValueError: it offers none)."""
    from agentrl.config.plugins import env_spec

    spec = env_spec(config.env)
    if spec.privileged is None:
        raise ValueError(
            f"--objective opsd: env {spec.name} offers no privileged context "
            "(EnvSpec.privileged); toy-fetch does, or use --objective opd with a teacher"
        )
    return spec.privileged


async def _objective(
    config: TrainConfig, tokenizer: Any, backend: Any, renderer: Any
) -> dict[str, Any]:
    """The Trainer's arguments for `--objective`: a `Distillation` of `--teacher-model` (opd)
    or of the live model shown the env's privileged context (opsd); nothing for rl and rft (the
    Trainer keeps the won trajectories when `config.objective` is rft)."""
    from agentrl.training.build import teacher_for
    from agentrl.training.distillation import Distillation
    from agentrl.training.self_distillation import PrivilegedTeacher

    if config.objective is Objective.RFT:
        print("objective rft: cross entropy on the won trajectories of each update")
    if config.objective in (Objective.RL, Objective.RFT):
        return {}
    coefs = (
        f"kl coef {config.teacher_kl_coef}, reward coef {config.teacher_reward_coef}, "
        f"advantage clip {config.teacher_advantage_clip}"
    )
    if config.teacher_signal is DistillSignal.TEACHER_TOKENS:
        coefs = "signal teacher_tokens (cross entropy towards the teacher's labels)"
    if config.objective is Objective.OPD:
        teacher: Any = await teacher_for(config, tokenizer)
        print(f"objective opd: teacher {config.teacher_model}, {coefs}, loss {config.loss.value}")
    else:
        privileged = privileged_context(config)
        teacher = PrivilegedTeacher(backend.sampler, renderer, lambda t: privileged(t.task))
        print(f"objective opsd: the model shown env {config.env}'s privileged context, {coefs}")
    distillation = Distillation(
        teacher,
        kl_coef=config.teacher_kl_coef,
        reward_coef=config.teacher_reward_coef,
        advantage_clip=config.teacher_advantage_clip,
        signal=config.teacher_signal,
    )
    return {"distillation": distillation}


async def _train_agent(config: TrainConfig, tasks: list[TaskInfo], tokenizer: Any) -> int:
    """`--agent`: the agent plays the games through the gateway, served on a loopback port."""
    from agentrl.gateway.agent import load_agent
    from agentrl.recipes.agent import agent_trainer
    from agentrl.training import recipe

    agent = load_agent(config.agent or "")
    backend = await recipe.training_backend_for(config, tokenizer)
    try:
        async with agent_trainer(
            agent, tasks, config=config, backend=backend, tokenizer=tokenizer, announce=print
        ) as run:
            return await _run(run.trainer, config)
    finally:
        await backend.close()


def interrupted(unit: str, completed: int, saved: CheckpointInfo | None) -> KeyboardInterrupt:
    """Say what an interrupted run kept and how to continue it (on stderr); the exception
    that ends the command (exit 130 / 143)."""
    where = f"checkpoint {saved.name} is saved" if saved else f"no {unit} was completed"
    print(
        f"\ninterrupted after {unit} {completed}; {where}. Continue with the same command plus "
        "--resume.",
        file=sys.stderr,
    )
    return KeyboardInterrupt()


async def _run(trainer: Any, config: TrainConfig) -> int:
    """Run `trainer`, print where its checkpoints are; an interrupt says how to resume."""
    try:
        result = await trainer.run()
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise interrupted("update", trainer.completed, trainer.last_saved) from None
    finally:
        await trainer.close()
    print(
        f"finished update {result.last_update} of {config.max_steps}; run folder {config.run_dir}"
    )
    for info in result.checkpoints:
        record = config.run_dir / "checkpoints" / f"{info.name}.json"
        print(f"  {info.name}: --model-path {record}   (sampler {info.sampler_path})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run `agentrl train` with the parsed flags; the exit status."""
    config = config_from_args(TrainConfig, args)
    return run_until_signal(_train(config))


def run_rft(args: argparse.Namespace) -> int:
    """Run `agentrl rft` (`agentrl train --objective rft`); the exit status."""
    config = config_from_args(TrainConfig, args, objective="rft")
    return run_until_signal(_train(config))


def add_parser(subparsers: Subparsers) -> None:
    """Register the `train` command."""
    parser = subparsers.add_parser(
        "train",
        help="train a LoRA policy with group rollouts and a PPO loss",
        description="Train the tool-calling agent: each update rolls out --games-per-batch "
        "games x --group-size trajectories, computes advantages, and takes one PPO step. "
        "Checkpoints go to --run-dir every --save-every updates and at the end; Ctrl-C saves "
        "one; --resume continues the same game order. Defaults: the published recipe.",
    )
    add_config_arguments(parser, TrainConfig)
    parser.set_defaults(handler=run)


_NOT_RFT = (
    "objective",
    "teacher_model",
    "teacher_kl_coef",
    "teacher_reward_coef",
    "teacher_advantage_clip",
    "teacher_signal",
    "loss",
)


def add_rft_parser(subparsers: Subparsers) -> None:
    """Register the `rft` command (`train --objective rft`)."""
    parser = subparsers.add_parser(
        "rft",
        help="rejection-sampling fine-tuning: train on the policy's own won trajectories",
        description="Rejection-sampling fine-tuning (expert iteration): each update plays "
        "--games-per-batch games x --group-size trajectories with the current policy, keeps "
        "the won ones and takes one cross-entropy step on their assistant tokens. The same "
        "run folder, checkpoints, metrics (rft/kept per update) and --resume as agentrl train.",
    )
    add_config_arguments(parser, TrainConfig, exclude=_NOT_RFT)
    parser.set_defaults(handler=run_rft)
