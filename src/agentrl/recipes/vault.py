"""The learning recipe on the vault task (`agentrl.envs.toy.vault`): recall a code told once.

The vault env goes through the recipe's generic path: its `EnvSpec` (`vault_spec`) becomes a
`LearningEnv` (`learning_env_from_spec`: the spec's training and held-out splits, the
plain-command protocol over the env's listed commands), and `agentrl.recipes.learning.learn`
trains the project tokenizer on its text, warm-starts on the random valid policy and runs RL.
"""

from __future__ import annotations

from dataclasses import replace

from agentrl.envs.toy.spec import vault_spec
from agentrl.envs.toy.vault import vault_random_success
from agentrl.recipes.fetch import LearningSetup
from agentrl.recipes.learning_env import LearningEnv, learning_env_from_spec

__all__ = [
    "THREADS",
    "VAULT",
    "VAULT_BUTTONS",
    "VAULT_ROOMS",
    "VAULT_SMOKE",
    "vault_learning_env",
]

VAULT_BUTTONS = 4
VAULT_ROOMS = 3

VAULT = LearningSetup(
    updates=150,
    games_per_batch=16,
    group_size=4,
    hidden_size=128,
    heads=8,
    max_steps=VAULT_ROOMS + 1,
    eval_every=50,
    sft_batch=16,
    warm_winners_only=True,
)
"""`benchmarks/learning_vault.py` and `agentrl learn --env toy-vault` (held-out success
above 90% from the warm start on, 99-100% after 150 updates, on 3 of 3 seeds:
docs/learning.md, the vault task). What differs from the fetch recipe, and why: the warm
start imitates the random policy's *won* games only (`warm_winners_only`: on all of its games
the model learns to press a random button, and RL then has to find the recall alone; the
winners press the button the first message named), a wider model with more heads (hidden 128,
8 heads of 16), 16 games of 4 per update, no spare reply (`rooms + 1` replies: with a spare
one the model learns to write the code as an invalid command early, which the status line
then repeats next to the buttons), warm-start batches of 16."""
THREADS = 2
"""Torch threads of a vault run (the wider model gains from a second one; fetch uses one)."""
VAULT_SMOKE = replace(
    VAULT,
    updates=2,
    games_per_batch=2,
    group_size=2,
    train_games=8,
    eval_games=2,
    eval_samples=2,
    eval_every=1,
    demos=4,
    sft_steps=2,
    sft_batch=4,
    hidden_size=64,
    heads=4,
)
"""Plumbing only (seconds)."""


def vault_learning_env(
    setup: LearningSetup, buttons: int = VAULT_BUTTONS, rooms: int = VAULT_ROOMS
) -> LearningEnv:
    """The vault task as the learning recipe plays it: `setup.train_games` training games,
    `setup.eval_games` held-out games, plain commands, `setup.max_steps` replies."""
    env = learning_env_from_spec(
        vault_spec(buttons, rooms),
        train_games=setup.train_games,
        eval_games=setup.eval_games,
        max_steps=setup.max_steps,
    )
    return replace(env, random_success=vault_random_success(buttons))
