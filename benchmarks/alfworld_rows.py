"""What imitation reads of the ALFWorld miniature's demonstrations, per context window.

The explorer plays the first `--games` demonstrated train games of a seed (the `cpu` preset's
draw, `--protocol` etc. as in `benchmarks/alfworld_cpu.py`), and each `--windows` entry
(`WINDOW/SLACK`, `0/0` for the whole history) turns its episodes into imitation rows
(`agentrl.recipes.alfworld_scratch.demonstrations`). Per episode it reports the rows, the
tokens read, the mean row, the sum of squared row lengths (what attention costs, which is
most of a step at hidden 64: docs/alfworld.md) and the trained tokens (the same under every
window: each reply is a target once). No model is trained: it measures the cost side only.

    python benchmarks/alfworld_rows.py --data-root runs/acts1/games --protocol plain-actions

The last line: `games=N trained_per_episode=T` and, per window, `tokens_W_S=...` and
`attention_W_S=...` (the squared sum relative to the first window's).
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

from agentrl.algo.datums import Datum
from agentrl.recipes.alfworld_scratch import (
    PRESETS,
    add_format_arguments,
    demonstrations,
    format_overrides,
    scratch_tasks,
)


@dataclass(frozen=True)
class RowCost:
    """Imitation rows of some episodes, per episode."""

    episodes: int
    rows: float
    tokens: float
    squared: float
    trained: float

    @property
    def mean_row(self) -> float:
        """Tokens of the average row."""
        return self.tokens / self.rows if self.rows else 0.0


def row_cost(episodes: list[list[Datum]]) -> RowCost:
    """Per-episode rows, tokens, squared row lengths and trained tokens of `episodes`."""
    if not episodes:
        raise ValueError("no demonstrated episode to measure (every one was all mistakes?)")
    lengths = [len(datum) for episode in episodes for datum in episode]
    trained = sum(datum.num_assistant_tokens for episode in episodes for datum in episode)
    n = len(episodes)
    return RowCost(
        episodes=n,
        rows=len(lengths) / n,
        tokens=sum(lengths) / n,
        squared=sum(length * length for length in lengths) / n,
        trained=trained / n,
    )


def parse_window(text: str) -> tuple[int, int]:
    """`WINDOW/SLACK` (`0/0`: the whole history) as integers."""
    try:
        window, slack = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a window is WINDOW/SLACK (e.g. 2/2; 0/0 the whole history), got {text!r}"
        ) from None
    return window, slack  # the ranges: `ScratchSetup`'s own checks (`main`)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, required=True, help="generated games")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--games", type=int, default=40, help="train games demonstrated")
    parser.add_argument("--seed", type=int, default=0, help="the seed whose games are drawn")
    parser.add_argument(
        "--windows",
        type=parse_window,
        nargs="+",
        default=[(2, 2), (1, 1), (1, 0), (2, 0), (0, 0)],
        help="WINDOW/SLACK pairs (0/0: the whole history)",
    )
    add_format_arguments(parser)
    args = parser.parse_args()
    if args.games < 1:
        parser.error(f"--games must be >= 1, got {args.games}")
    base = replace(format_overrides(PRESETS[args.preset], args), seed=args.seed)
    try:  # every window checked by `ScratchSetup` before the first is played
        setups = [replace(base, context_window=w or None, context_slack=s) for w, s in args.windows]
    except ValueError as error:
        parser.error(f"--windows: {error}")
    tasks = scratch_tasks(base, args.data_root, args.data_root).train[: args.games]
    print("| window / slack | rows | tokens | mean row | squared row lengths | trained |")
    print("|---|---|---|---|---|---|")
    costs = {}
    for (window, slack), setup in zip(args.windows, setups, strict=True):
        cost = row_cost(asyncio.run(demonstrations(setup, tasks)))
        costs[(window, slack)] = cost
        print(
            f"| {window}/{slack} | {cost.rows:.2f} | {cost.tokens:.0f} | {cost.mean_row:.0f} | "
            f"{cost.squared / 1e3:.0f}K | {cost.trained:.1f} |",
            flush=True,
        )
    first = costs[args.windows[0]]
    pairs = [f"games={len(tasks)}", f"trained_per_episode={first.trained:.1f}"]
    for (window, slack), cost in costs.items():
        pairs.append(f"tokens_{window}_{slack}={cost.tokens:.0f}")
        pairs.append(f"attention_{window}_{slack}={cost.squared / first.squared:.3f}")
    print(" ".join(pairs))


if __name__ == "__main__":
    main()
