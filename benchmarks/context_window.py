"""What a context window saves on ALFWorld: full history against the last N turns, same episodes.

Plays one recipe-sized update (8 generated games x 8 branches, 50 steps, 12K tokens) twice
through the real rollout engine, the real Qwen tokenizer and chat template and the fast
ALFWorld engine: once with the whole history in every prompt (the recipe) and once with
`RecentTurns(N)` (`--window`, default 5; `--slack`). Replies come from a scripted sampler that
picks an admissible action from the prompt's last tool message with the request's keyed seed,
so both runs play the same episodes action for action (checked) and only the prompts differ.
No model runs: the numbers are token counts, the cost a model would pay.

Per update it reports
- prompt tokens sent (summed over requests) and the longest prompt;
- prefill with a prefix cache (each request's tokens past the longest prefix it shares with
  the branch's previous prompt and completion: what vLLM or the local sampler computes);
- training input tokens (summed over the datums: what a forward-backward pass reads) and
  trained tokens (sampled, masked in; the same in both runs), and datums per trajectory.

    PYTHONPATH=src python benchmarks/context_window.py                 # window 5, slack 0
    PYTHONPATH=src python benchmarks/context_window.py --window 5 --slack 5

The last line is

    full_prompt_tokens=A window_prompt_tokens=B prompt_ratio=B/A full_prefill=C
    window_prefill=D prefill_ratio=D/C full_train_tokens=E window_train_tokens=F
    train_ratio=F/E longest_full=G longest_window=H budget_stops_full=I
    budget_stops_window=J same_actions=true

(`same_actions`: both runs took the same action on every turn both played; the full-history
run may stop earlier, at the token budget.)
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from rollout_engine import ScriptedSampler

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.core.types import Completion, CompletionStop, StopReason, TrajectoryGroup
from agentrl.datums import trajectory_to_datums
from agentrl.envs.alfworld import AlfworldEnvOptions, alfworld_group_factory, generate_games
from agentrl.envs.alfworld.pool import EnvWorkerPool
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.rollout import (
    ContextPolicy,
    FullHistory,
    RecentTurns,
    RolloutConfig,
    rollout_batch,
)


class KeyedAdmissibleSampler(ScriptedSampler):
    """Replies with an admissible action of the prompt's last tool message (read as
    `rollout_engine.ScriptedSampler` reads it), drawn with the request's keyed seed: the same
    draws whatever the prompt looks like."""

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` keyed replies (`params.seed` must be set)."""
        assert params.seed is not None
        actions = self._actions(prompt_tokens)
        out = []
        for k in range(num_samples):
            action = random.Random(params.seed * 1009 + k).choice(actions)
            ids = self.tokenizer.encode(self.protocol.call_text(action), add_special_tokens=False)
            tokens = (*ids, self.stop)
            out.append(Completion(tokens, (-0.25,) * len(tokens), CompletionStop.STOP))
        return out


@dataclass(frozen=True)
class Counts:
    """One update's token counts."""

    prompt_tokens: int
    longest_prompt: int
    prefill: int
    train_tokens: int
    trained_tokens: int
    datums: int
    trajectories: int
    budget_stops: int
    """Trajectories cut by the 12K token budget."""
    actions: tuple[tuple[str | None, ...], ...]


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def counts(groups: Sequence[TrajectoryGroup]) -> Counts:
    """Token counts of an update (see the module docstring)."""
    prompt = longest = prefill = train = trained = datums = 0
    actions = []
    trajectories = [t for g in groups for t in g.trajectories]
    for trajectory in trajectories:
        before: tuple[int, ...] = ()
        for turn in trajectory.turns:
            tokens = tuple(turn.prompt_tokens)
            prompt += len(tokens)
            longest = max(longest, len(tokens))
            prefill += len(tokens) - _shared(before, tokens)
            before = tokens + tuple(turn.completion_tokens)
        for datum in trajectory_to_datums(trajectory, [1.0] * len(trajectory.turns)):
            train += len(datum)
            trained += datum.num_assistant_tokens
            datums += 1
        actions.append(tuple(turn.parsed.action for turn in trajectory.turns))
    budget = sum(t.stop_reason is StopReason.TOKEN_BUDGET for t in trajectories)
    return Counts(
        prompt, longest, prefill, train, trained, datums, len(trajectories), budget, tuple(actions)
    )


def same_play(full: Counts, window: Counts) -> bool:
    """Both runs took the same actions on every turn both played (the full-history run may
    stop earlier, at the token budget)."""
    return all(
        a[: len(b)] == b[: len(a)] for a, b in zip(full.actions, window.actions, strict=True)
    )


async def update(tasks: Any, tokenizer: Any, context: ContextPolicy) -> Counts:
    """One update of `tasks` with `context`."""
    protocol = alfworld_tool_protocol()
    renderer = ChatRenderer(tokenizer, protocol.tools)
    pool = EnvWorkerPool()
    factory = alfworld_group_factory(AlfworldEnvOptions(max_steps=50), pool)
    config = RolloutConfig(
        group_size=8,
        max_env_steps=50,
        max_trajectory_tokens=12_000,
        sampling=SamplingParams(seed=7),
        context=context,
    )
    try:
        groups = await rollout_batch(
            tasks,
            env_factory=factory,
            sampler=KeyedAdmissibleSampler(tokenizer, renderer),
            renderer=renderer,
            protocol=protocol,
            config=config,
            max_concurrent_groups=len(tasks),
        )
    finally:
        await factory.close()
    return counts(groups)


def main() -> None:
    """Play the update both ways and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=5, help="turns kept (RecentTurns)")
    parser.add_argument("--slack", type=int, default=0, help="RecentTurns slack")
    parser.add_argument("--games", type=int, default=8, help="generated games per update")
    parser.add_argument("--seed", type=int, default=0, help="game generation seed")
    args = parser.parse_args()
    tokenizer = build_qwen_tokenizer()
    with tempfile.TemporaryDirectory() as scratch:
        report = generate_games(scratch, train=args.games, seed=args.seed, progress=True)
        tasks = [g.to_task() for g in report.games]
        full = asyncio.run(update(tasks, tokenizer, FullHistory()))
        window = asyncio.run(update(tasks, tokenizer, RecentTurns(args.window, args.slack)))
    same = same_play(full, window)
    print(
        f"{args.games} generated games x 8 branches, 50 steps, 12K tokens; "
        f"window {args.window}, slack {args.slack}"
    )
    print("| | full history | window | ratio |")
    print("|---|---|---|---|")
    for name, a, b in (
        ("prompt tokens sent", full.prompt_tokens, window.prompt_tokens),
        ("prefill with a prefix cache", full.prefill, window.prefill),
        ("training input tokens", full.train_tokens, window.train_tokens),
        ("trained (sampled) tokens", full.trained_tokens, window.trained_tokens),
        ("longest prompt", full.longest_prompt, window.longest_prompt),
        ("trajectories cut by the token budget", full.budget_stops, window.budget_stops),
        (
            "datums per trajectory",
            full.datums / full.trajectories,
            window.datums / window.trajectories,
        ),
    ):
        print(f"| {name} | {a:,.1f} | {b:,.1f} | {b / a:.2f} |")
    print(
        f"full_prompt_tokens={full.prompt_tokens} window_prompt_tokens={window.prompt_tokens} "
        f"prompt_ratio={window.prompt_tokens / full.prompt_tokens:.3f} "
        f"full_prefill={full.prefill} window_prefill={window.prefill} "
        f"prefill_ratio={window.prefill / full.prefill:.3f} "
        f"full_train_tokens={full.train_tokens} window_train_tokens={window.train_tokens} "
        f"train_ratio={window.train_tokens / full.train_tokens:.3f} "
        f"longest_full={full.longest_prompt} longest_window={window.longest_prompt} "
        f"budget_stops_full={full.budget_stops} budget_stops_window={window.budget_stops} "
        f"same_actions={str(same).lower()}"
    )


if __name__ == "__main__":
    main()
