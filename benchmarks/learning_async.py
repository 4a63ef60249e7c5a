"""Does asynchronous training learn as well as synchronous? The fetch learning benchmark,
synchronous vs asynchronous rollouts at staleness 1 (and 2), same seeds and budget.

Every variant trains the fetch task of `agentrl.recipes.learning` (the warm start, games,
seeds and update count of `benchmarks/learning.py`): `sync` is the recipe's loop; `async_s1`
and `async_s2` play with `async_rollouts=True` and `max_staleness` 1 / 2 (partial rollouts:
each turn samples the newest weights, an update trains the first groups to finish,
`agentrl.training.asynchronous`) with the default loss, PPO against each token's behaviour
logprobs and the dual clip; `async_s1_decoupled` adds `tis_cap=2` (decoupled PPO). Which
groups an asynchronous update takes depends on timing, so those runs are not bit-reproducible;
the synchronous ones are.

    python benchmarks/learning_async.py --out runs/learning_async \
        [--variants sync async_s1 async_s1_decoupled]

Writes `learning_async.png`, `learning_async.md` (table, and which differences exceed seed
noise) and `runs/*.json`; the last line is `random_success=R success_before=B
success_after=A seeds=N minutes=M seeds_ok=K` of the first variant listed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import learning_runs
from learning_runs import Variant

VARIANTS: dict[str, Variant] = {
    "sync": lambda setup: setup,
    "async_s1": lambda setup: replace(setup, async_rollouts=True, max_staleness=1),
    "async_s2": lambda setup: replace(setup, async_rollouts=True, max_staleness=2),
    "async_s1_decoupled": lambda setup: replace(
        setup, async_rollouts=True, max_staleness=1, tis_cap=2.0
    ),
}


if __name__ == "__main__":
    learning_runs.main(
        Path(__file__),
        __doc__.splitlines()[0],
        VARIANTS,
        option="--variants",
        stem="learning_async",
        label="variant",
        title="fetch task: held-out success, sync vs async (mean over seeds, min-max band)",
    )
