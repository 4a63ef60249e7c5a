"""The concepts assembled in Python: Env, ToolProtocol, Rollout, AdvantageEstimator, Trainer.

Trains the tiny random-initialised model of the local backend (torch, CPU) on the toy game
for a couple of updates. A random model never writes a tool call (every group would have equal
rewards, i.e. no learning signal), so it is first warm-started with a few supervised steps on
scripted demonstrations. Expect no real skill from a model this small; the same code trains a
real model with `LocalBackend.from_pretrained(path)` or the PyTRIO backend.

Run: python examples/03_train_tiny_model.py
"""

import asyncio
import os
import shutil
from pathlib import Path

from agentrl import ChatRenderer, LeaveOneOut, RolloutConfig, TrainConfig, Trainer, rollout_group
from agentrl.backends.local import LocalBackend, LoraSpec
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.envs.toy import make_toy_group, toy_task, toy_tasks, toy_tool_protocol
from agentrl.recipes.demo import demonstration_datums, warm_start
from agentrl.testing import ScriptedSampler

out = Path(os.environ.get("AGENTRL_EXAMPLE_OUT", "runs/examples")) / "03_train_tiny_model"
shutil.rmtree(out, ignore_errors=True)  # a fresh run each time (a Trainer never reuses a run)
tokenizer = build_qwen_tokenizer()
protocol = toy_tool_protocol(include_admissible=False)  # shorter prompts for a CPU
renderer = ChatRenderer(tokenizer, protocol.tools)
tasks = toy_tasks(8)

# The model side: a TrainingBackend (LoRA on a tiny Qwen3-architecture model).
backend = LocalBackend.tiny(
    tokenizer, seed=0, lora=LoraSpec(rank=8), checkpoint_dir=out / "checkpoints"
)


def plan(seed: int) -> list[str]:
    """The winning commands of toy game `seed`."""
    game = toy_task(seed)
    return [
        f"go to {game.object_place}",
        f"take {game.obj} from {game.object_place}",
        f"go to {game.target}",
        f"move {game.obj} to {game.target}",
    ]


async def main() -> None:
    # 1. Demonstrations through the same rollout engine, then a short supervised warm start.
    demos = [
        await rollout_group(
            task,
            env_factory=make_toy_group,
            sampler=ScriptedSampler(tokenizer, [[protocol.call_text(a) for a in plan(seed)]]),
            renderer=renderer,
            protocol=protocol,
            config=RolloutConfig(group_size=1, max_env_steps=6),
        )
        for seed, task in enumerate(tasks[:4])  # toy_tasks(8) are games 0..7
    ]
    print("demonstrations won:", [g.trajectories[0].won for g in demos])
    losses = await warm_start(backend, demonstration_datums(demos, 2), 6, 1e-2)
    print(f"warm start: loss {losses[0]:.2f} -> {losses[-1]:.2f}")

    # 2. RL: the Trainer runs rollouts, rewards, advantages, datums and one PPO step per update.
    config = TrainConfig(
        base_model="tiny",
        backend="local",
        env="toy",
        max_steps=2,
        games_per_batch=2,
        group_size=4,
        max_episode_steps=6,
        max_trajectory_tokens=1_500,
        max_assistant_tokens=32,
        learning_rate=1e-4,
        save_every=2,
        run_dir=out,
        show_admissible=False,
    )
    trainer = Trainer(
        config=config,
        backend=backend,
        env_factory=make_toy_group,
        tasks=tasks,
        renderer=renderer,
        protocol=protocol,
        estimator=LeaveOneOut(),  # any AdvantageEstimator object (or by name in the config)
        progress=False,
    )
    result = await trainer.run()
    for m in result.metrics:
        loss = "-" if m.loss is None else f"{m.loss:+.4f}"
        print(
            f"update {m.update}: reward {m.stats.reward_mean:+.3f}, trained "
            f"{m.trained_trajectories}/{m.stats.episodes} trajectories, loss {loss}"
        )
    print("checkpoint:", result.checkpoints[-1].sampler_path)


asyncio.run(main())
