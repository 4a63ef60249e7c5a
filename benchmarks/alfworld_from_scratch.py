"""ALFWorld from scratch: imitation of an exploring expert, then RL through the Trainer.

A small Qwen3-architecture model, randomly initialised, is trained by imitation on the
demonstrations of an exploring expert that sees only what the agent sees, then by RL through
the Trainer, and evaluated on generated valid_unseen games before and after RL (the recipe:
`agentrl.recipes.alfworld_scratch`). It writes `result.json` (every number, per-phase seconds) and
`result.md` (a table) into `--out`, the Trainer's metrics into `--out/run/metrics.jsonl`, every
evaluated episode into `--out/eval/*.jsonl` (the planner's, the imitated model's, after RL) and
the plots into `--out/plots` (`alfworld.png`: held-out success per RL update);
the last line printed is

    success_before_rl=X success_after_rl=Y minutes=M device=D

    python benchmarks/alfworld_from_scratch.py --size cpu-smoke --out runs/alfworld-smoke
    python benchmarks/alfworld_from_scratch.py --size gpu --out runs/alfworld-gpu   # one H200

`--data-root DIR` plays games already generated there (the first `train_games` /
`eval_games` of its train / valid_unseen splits) instead of generating them into
`--out/games`. The sizes of the `gpu` preset are reasoned in docs/alfworld.md ("From scratch
on a GPU").
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path

from agentrl.recipes.alfworld_scratch import (
    PRESETS,
    add_format_arguments,
    format_overrides,
    result_markdown,
    run_scratch,
    write_results,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="cpu-smoke")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-root", type=Path, default=None, help="play games already here")
    parser.add_argument("--device", default=None, help="override the preset's torch device")
    parser.add_argument("--updates", type=int, default=None, help="override the RL updates")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--imitated",
        type=Path,
        default=None,
        help="an earlier --out: reuse the imitated model saved there when it was imitated "
        "with the same setup (RL settings may differ); --out itself resumes after a crash in RL",
    )
    add_format_arguments(parser)
    args = parser.parse_args()
    setup = PRESETS[args.size]
    overrides = {
        "device": args.device,
        "updates": args.updates,
        "seed": args.seed,
    }
    given = {k: v for k, v in overrides.items() if v is not None}
    setup = format_overrides(replace(setup, **given), args)
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run_scratch(setup, args.out, args.data_root, args.imitated))
    write_results(result, args.out)
    print(result_markdown(result))
    minutes = result.seconds["total"] / 60
    print(
        f"success_before_rl={result.before_rl.success:.3f} "
        f"success_after_rl={result.after_rl.success:.3f} minutes={minutes:.2f} "
        f"device={result.device}"
    )


if __name__ == "__main__":
    main()
