"""The loss family on the learning benchmark, at the same budget and seeds: PPO, clip-higher,
importance sampling, CISPO, GSPO, Dr. GRPO's constant normalisation and TIS.

Every variant trains the fetch task of `agentrl.recipes.learning` (the same warm start, games, seeds
and update count as `benchmarks/learning.py`) one update off-policy (`max_steps_off_policy=1`): each
batch is sampled by the previous update's weights, so the ratio to the behaviour policy is not 1 and
the losses really differ (on-policy, with one optimizer step per batch, ppo, importance sampling,
CISPO and TIS have the same gradient). `ppo_on_policy` is the synchronous recipe (k = 0) for
reference. The KL penalty is not in the table: its reference is the base model with the LoRA adapter
disabled, and this benchmark trains every weight of a from-scratch model (no adapter, no meaningful
reference); its math is covered by tests/test_losses*.py.

    python benchmarks/losses.py --out runs/losses [--losses ppo cispo ...] [--seeds 3]

Writes `losses.png` (held-out success per update, mean over seeds with a min-max band),
`losses.md` (table and which differences exceed seed noise) and `runs/*.json`; the last line is
`random_success=R success_before=B success_after=A seeds=N minutes=M seeds_ok=K` of the first
loss listed.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import learning_runs
from learning_runs import Variant

from agentrl.backends.base import LossName, LossNormalisation
from agentrl.recipes.learning import LearningSetup

ON_POLICY = "ppo_on_policy"
TOKENS_PER_UPDATE = 640.0
"""Dr. GRPO's constant: 64 trajectories x ~10 assistant tokens (two 5-token replies)."""


def _loss(name: str, setup: LearningSetup) -> LearningSetup:
    off = replace(setup, max_steps_off_policy=1)
    if name == ON_POLICY:
        return replace(setup, max_steps_off_policy=0)
    if name == "ppo":
        return off
    if name == "ppo_clip_higher":
        return replace(off, clip_high=1.28)
    if name == "importance_sampling":
        return replace(off, loss=LossName.IMPORTANCE_SAMPLING)
    if name == "cispo":
        return replace(off, loss=LossName.CISPO, clip_low=1e-6, clip_high=1.28)
    if name == "gspo":
        return replace(
            off,
            loss=LossName.GSPO,
            clip_low=1 - 3e-3,  # 10x the GSPO paper's 3e-4 / 4e-4: what the docs' table used
            clip_high=1 + 4e-3,
            normalisation=LossNormalisation.SEQUENCE,
        )
    if name == "ppo_dr_grpo":
        return replace(
            off, normalisation=LossNormalisation.CONSTANT, norm_constant=TOKENS_PER_UPDATE
        )
    if name == "ppo_tis":
        return replace(off, tis_cap=2.0)
    raise ValueError(f"unknown loss variant {name!r}")


LOSSES = (
    "ppo",
    ON_POLICY,
    "ppo_clip_higher",
    "importance_sampling",
    "cispo",
    "gspo",
    "ppo_dr_grpo",
    "ppo_tis",
)
"""GSPO's clip range is on the sequence ratio, hence much narrower; CISPO clips only from above
(the lower bound is effectively off)."""
VARIANTS: dict[str, Variant] = {name: partial(_loss, name) for name in LOSSES}


if __name__ == "__main__":
    learning_runs.main(
        Path(__file__),
        __doc__.splitlines()[0],
        VARIANTS,
        option="--losses",
        stem="losses",
        label="loss",
        title="fetch task, one update off-policy: held-out success per loss",
    )
