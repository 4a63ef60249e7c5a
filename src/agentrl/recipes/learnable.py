"""The envs the learning recipe runs on by name (`agentrl learn --env NAME`).

`toy-fetch` and `toy-vault` have tuned presets (their `LearningSetup`, a seconds-long short one
and the `LearningEnv` they build); any other installed env (`agentrl envs`) runs through its
`EnvSpec` (`learning_env_from_spec`: its `train` split, a held-out split, plain commands over
its listed actions) with the generic setup. `run_learn` runs one and writes its result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from agentrl.recipes.fetch import BENCHMARK, SMOKE, LearningSetup, fetch_learning_env
from agentrl.recipes.learning import EvalPoint, LearningResult, learn, plot_learning
from agentrl.recipes.learning_env import LearningEnv, learning_env_from_spec
from agentrl.recipes.vault import THREADS as VAULT_THREADS
from agentrl.recipes.vault import VAULT, VAULT_SMOKE, vault_learning_env

__all__ = [
    "GENERIC",
    "LEARN_PRESETS",
    "LearnPreset",
    "learn_preset",
    "learn_summary",
    "run_learn",
]


@dataclass(frozen=True)
class LearnPreset:
    """An env the recipe knows by name: its setup, a short setup and how it builds the env."""

    name: str
    setup: LearningSetup
    """The full run."""
    short: LearningSetup
    """A plumbing run of seconds (tests, `--short`)."""
    env: Callable[[LearningSetup], LearningEnv]
    """The `LearningEnv` of a setup."""
    threads: int = 1
    """Torch threads of a run."""


GENERIC = LearningSetup(max_steps=8, train_games=256, eval_games=16)
"""The setup of an env without a preset (8 replies per episode)."""

LEARN_PRESETS: dict[str, LearnPreset] = {
    "toy-fetch": LearnPreset("toy-fetch", BENCHMARK, SMOKE, fetch_learning_env),
    "toy-vault": LearnPreset("toy-vault", VAULT, VAULT_SMOKE, vault_learning_env, VAULT_THREADS),
}
"""The tuned presets by env name."""


def _spec_env(name: str) -> Callable[[LearningSetup], LearningEnv]:
    from agentrl.config.plugins import UnknownEnvError, env_spec

    try:
        spec = env_spec(name)
    except UnknownEnvError as exc:
        presets = ", ".join(LEARN_PRESETS)
        raise UnknownEnvError(f"{exc} (the learning recipe's presets: {presets})") from None

    def build(setup: LearningSetup) -> LearningEnv:
        return learning_env_from_spec(
            spec,
            train_games=setup.train_games,
            eval_games=setup.eval_games,
            max_steps=setup.max_steps,
        )

    return build


def learn_preset(name: str) -> LearnPreset:
    """The preset of `name`, else one for the installed env `name` with `GENERIC`."""
    if name in LEARN_PRESETS:
        return LEARN_PRESETS[name]
    short = replace(SMOKE, max_steps=GENERIC.max_steps)
    return LearnPreset(name, GENERIC, short, _spec_env(name))


def learn_summary(result: LearningResult) -> str:
    """The run's one-line summary: `env=E random_success=R success_before=B success_after=A
    updates=N minutes=M`."""
    return (
        f"env={result.env} random_success={result.random_success:.3f} "
        f"success_before={result.before:.3f} success_after={result.after:.3f} "
        f"updates={result.setup.updates} minutes={result.seconds / 60:.1f}"
    )


def run_learn(
    preset: LearnPreset,
    setup: LearningSetup,
    out: Path,
    *,
    on_point: Callable[[EvalPoint], None] | None = None,
) -> LearningResult:
    """Run the recipe on `preset`'s env with `setup` (`preset.threads` torch threads: the fetch
    model is fastest on one, the games run beside it); writes `out/result.json` and
    `out/learning.png` (the run's checkpoint goes under `out/run`)."""
    import asyncio

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(preset.threads)
    try:
        env = preset.env(setup)
        result = asyncio.run(learn(env, setup, out / "run", on_point=on_point))
    finally:
        torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
    plot_learning(result, out / "learning.png")
    return result
