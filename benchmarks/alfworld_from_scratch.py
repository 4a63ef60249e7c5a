"""ALFWorld from scratch: imitation of an exploring expert, then RL through the Trainer.

A small Qwen3-architecture model, randomly initialised, is trained by imitation on the
demonstrations of an exploring expert that sees only what the agent sees, then by RL through
the Trainer, and evaluated on generated valid_unseen games before and after RL (the recipe:
`agentrl.recipes.alfworld_scratch`). It writes `result.json` (every number, per-phase seconds) and
`result.md` (a table) into `--out`, the Trainer's metrics into `--out/run/metrics.jsonl`;
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
import json
from dataclasses import asdict, replace
from pathlib import Path

from agentrl.recipes.alfworld_scratch import PRESETS, ScratchResult, run_scratch


def markdown(result: ScratchResult) -> str:
    """The run as a markdown table."""
    rows = [
        ("exploring expert (train games)", result.explorer_train),
        ("exploring expert (valid_unseen)", result.explorer_eval),
        ("model before RL (valid_unseen)", result.before_rl),
        ("model after RL (valid_unseen)", result.after_rl),
    ]
    lines = [
        "| policy | success | episodes | turns / episode | invalid / turn | tokens / episode |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {s.success:.3f} | {s.episodes} | {s.turns_per_episode:.1f} | "
            f"{s.invalid_per_turn:.3f} | {s.tokens_per_episode:.0f} |"
        )
    setup = result.setup
    lines += [
        "",
        f"Model: {result.parameters / 1e6:.2f}M parameters (hidden {setup.hidden_size}, "
        f"{setup.layers} layers), device {result.device}; {result.demos} demonstrations "
        f"({result.demo_tokens} tokens), {setup.sft_steps} imitation steps ({result.sft_tokens} "
        f"tokens), {setup.updates} RL updates of {setup.games_per_batch} x {setup.group_size}.",
        "",
        "Wall seconds per phase: "
        + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items())
        + f"; CPU seconds of the main process: {result.cpu_seconds:.1f}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(PRESETS), default="cpu-smoke")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data-root", type=Path, default=None, help="play games already here")
    parser.add_argument("--device", default=None, help="override the preset's torch device")
    parser.add_argument("--updates", type=int, default=None, help="override the RL updates")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    setup = PRESETS[args.size]
    overrides = {"device": args.device, "updates": args.updates, "seed": args.seed}
    setup = replace(setup, **{k: v for k, v in overrides.items() if v is not None})
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run_scratch(setup, args.out, args.data_root))
    (args.out / "result.json").write_text(json.dumps(asdict(result), indent=2))
    (args.out / "result.md").write_text(markdown(result))
    print(markdown(result))
    minutes = result.seconds["total"] / 60
    print(
        f"success_before_rl={result.before_rl.success:.3f} "
        f"success_after_rl={result.after_rl.success:.3f} minutes={minutes:.2f} "
        f"device={result.device}"
    )


if __name__ == "__main__":
    main()
