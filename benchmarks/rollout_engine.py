"""Rollout engine speed: today's shipped engine against the new one, in the same run.

Used by `benchmarks/rollout.py --speed` (see its docstring). Both engines play the same
ALFWorld games through the real rollout engine with the real Qwen tokenizer and the fast
ALFWorld engine, driven by a scripted sampler that answers instantly with an admissible action
chosen from the prompt's last tool message (deterministic: both engines must produce the same
trajectories token for token):

- shipped: `ChatRenderer(verify="full", line_cache=False)` (the probe re-encoded every turn,
  the new text encoded in one piece) and a fresh worker process per group (as before the pool);
- new: `ChatRenderer()` (boundary checks, line cache) and one `EnvWorkerPool` kept across
  updates.

Prompt storage (one buffer per trajectory, turns as offsets) is shared by both: it is not an
option; its memory is measured separately (`--memory-probe`, in a fresh process).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.types import Completion, CompletionStop, TaskInfo, TrajectoryGroup
from agentrl.envs.alfworld import AlfworldEnvOptions, alfworld_group_factory
from agentrl.envs.alfworld.pool import EnvWorkerPool
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch

HEADING = "Available actions (copy one exactly):"


class ScriptedSampler:
    """Instant (or `base + per_token * tokens` seconds late) replies: an admissible action
    picked from the prompt's last tool message by the prompt's length and the sample index."""

    def __init__(
        self, tokenizer: Any, renderer: ChatRenderer, latency: tuple[float, float] = (0.0, 0.0)
    ) -> None:
        self.tokenizer = tokenizer
        self.protocol = alfworld_tool_protocol()
        self.stop = renderer.stop_tokens[0]
        self.latency = latency
        self.cpu = 0.0
        """Seconds of CPU spent inside `sample` (not the engine's)."""
        self._replies: dict[str, tuple[int, ...]] = {}
        self._open = tokenizer.convert_tokens_to_ids("<tool_response>")
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._decode = backend.decode if backend is not None else tokenizer.decode

    def _actions(self, prompt: Sequence[int]) -> list[str]:
        tail = list(prompt[-700:])
        if self._open in tail:  # only the last tool message
            tail = tail[len(tail) - 1 - tail[::-1].index(self._open) :]
        text = self._decode(tail, skip_special_tokens=False)
        block = text.rsplit(HEADING, 1)[-1].split("</tool_response>", 1)[0]
        block = block.split("<|im_end|>", 1)[0]
        return [line.strip() for line in block.strip().splitlines() if line.strip()] or ["look"]

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` scripted replies."""
        started = time.thread_time()
        actions = self._actions(prompt_tokens)
        out = []
        for k in range(num_samples):
            action = actions[(len(prompt_tokens) * 7 + 3 * k) % len(actions)]
            tokens = self._replies.get(action)
            if tokens is None:
                text = self.protocol.call_text(action)
                ids = self.tokenizer.encode(text, add_special_tokens=False)
                tokens = self._replies[action] = (*ids, self.stop)
            out.append(Completion(tokens, (-0.25,) * len(tokens), CompletionStop.STOP))
        self.cpu += time.thread_time() - started
        base, per_token = self.latency
        if base or per_token:
            await asyncio.sleep(base + per_token * max(len(c.tokens) for c in out))
        return out


@dataclass(frozen=True)
class Update:
    """One update's numbers."""

    turns: int
    wall: float
    main_cpu: float
    """Main-process CPU minus the scripted sampler's."""
    digest: str
    ideal: float = 0.0
    """Wall time if nothing but the sampler's latency took time (the critical path)."""


def digest(groups: Sequence[TrajectoryGroup]) -> str:
    """A hash of every trajectory's tokens, logprobs, prompt offsets and stop reason."""
    h = hashlib.sha256()
    for group in groups:
        for t in group.trajectories:
            h.update(repr((t.stop_reason, t.full_tokens, t.reward)).encode())
            h.update(repr([(len(x.prompt_tokens), x.logprobs) for x in t.turns]).encode())
    return h.hexdigest()[:16]


def ideal_wall(groups: Sequence[TrajectoryGroup], latency: tuple[float, float]) -> float:
    """The sampler's critical path: per group, the shared first request plus its slowest
    branch's later requests; groups run concurrently."""
    base, per_token = latency
    worst = 0.0
    for group in groups:
        firsts = [len(t.turns[0].completion_tokens) for t in group.trajectories if t.turns]
        first = base + per_token * max(firsts, default=0)
        chains = [
            sum(base + per_token * len(x.completion_tokens) for x in t.turns[1:])
            for t in group.trajectories
        ]
        worst = max(worst, first + max(chains, default=0.0))
    return worst


class Engine:
    """One engine configuration: its renderer and env factory (pool kept across updates)."""

    def __init__(self, name: str, tokenizer: Any, engine: str) -> None:
        self.name = name
        protocol = alfworld_tool_protocol()
        self.protocol = protocol
        shipped = name == "shipped"
        self.renderer = ChatRenderer(
            tokenizer, protocol.tools, verify="full" if shipped else True, line_cache=not shipped
        )
        self.pool = None if shipped else EnvWorkerPool()
        options = AlfworldEnvOptions(max_steps=50, engine=engine)
        self.factory = alfworld_group_factory(options, self.pool)
        self.tokenizer = tokenizer

    async def update(
        self, tasks: Sequence[TaskInfo], config: RolloutConfig, latency: tuple[float, float]
    ) -> tuple[Update, list[TrajectoryGroup]]:
        """Roll out `tasks` (all groups concurrently) and time it."""
        sampler = ScriptedSampler(self.tokenizer, self.renderer, latency)
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        groups = await rollout_batch(
            tasks,
            env_factory=self.factory,
            sampler=sampler,
            renderer=self.renderer,
            protocol=self.protocol,
            config=config,
            max_concurrent_groups=len(tasks),
        )
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu - sampler.cpu
        turns = sum(len(t.turns) for g in groups for t in g.trajectories)
        update = Update(turns, wall, cpu, digest(groups), ideal_wall(groups, latency))
        return update, groups

    async def close(self) -> None:
        """Stop the pool."""
        await self.factory.close()


def recipe_config() -> RolloutConfig:
    """The published recipe's budgets: K=8, 50 steps, 12K tokens."""
    return RolloutConfig(group_size=8, max_env_steps=50, max_trajectory_tokens=12_000)


async def compare(
    tokenizer: Any,
    batches: Sequence[Sequence[TaskInfo]],
    *,
    repeats: int,
    latency: tuple[float, float],
    engine: str,
) -> dict[str, Any]:
    """Per repeat and engine: cold (first) and steady (later) updates, then one update of the
    first batch with the realistic sampler latency. Engines alternate first."""
    config = recipe_config()
    rows: dict[str, list[dict[str, float]]] = {"shipped": [], "new": []}
    identical = True
    for repeat in range(repeats):
        order = ("shipped", "new") if repeat % 2 == 0 else ("new", "shipped")
        digests: dict[str, list[str]] = {}
        for name in order:
            eng = Engine(name, tokenizer, engine)
            try:
                updates = [(await eng.update(b, config, (0.0, 0.0)))[0] for b in batches]
                slow, _ = await eng.update(batches[0], config, latency)
            finally:
                await eng.close()
            digests[name] = [u.digest for u in updates] + [slow.digest]
            print(
                f"repeat {repeat + 1} {name}: "
                + ", ".join(f"{u.turns / u.wall:.0f}" for u in updates)
                + f" turns/s; latency run {slow.wall:.1f}s (ideal {slow.ideal:.1f}s)",
                file=sys.stderr,
                flush=True,
            )
            steady = updates[1:] or updates
            rows[name].append(
                {
                    "cold_turns_per_s": updates[0].turns / updates[0].wall,
                    "steady_turns_per_s": sum(u.turns for u in steady)
                    / sum(u.wall for u in steady),
                    "main_cpu_ms_per_turn": 1e3
                    * sum(u.main_cpu for u in steady)
                    / sum(u.turns for u in steady),
                    "non_sampler_share": max(0.0, 1.0 - slow.ideal / slow.wall),
                    "latency_wall_s": slow.wall,
                    "ideal_wall_s": slow.ideal,
                    "turns_per_update": statistics.fmean(u.turns for u in updates),
                }
            )
        identical = identical and digests["shipped"] == digests["new"]
    return {"rows": rows, "identical": identical}


def memory_probe(tokenizer: Any, tasks: Sequence[TaskInfo], engine: str) -> dict[str, float]:
    """Peak RSS above the process baseline of one recipe-scale batch (new engine), and what
    today's per-turn prompt tuples would add to the same batch. Linux only."""

    def rss_mb(field: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def run() -> dict[str, float]:
        eng = Engine("new", tokenizer, engine)
        try:
            await eng.update(tasks[:1], replace(recipe_config(), max_env_steps=3), (0.0, 0.0))
            gc.collect()
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM)
            base = rss_mb("VmRSS")
            _, groups = await eng.update(tasks, recipe_config(), (0.0, 0.0))
            gc.collect()
            peak = rss_mb("VmHWM")
            held = rss_mb("VmRSS")
            tuples = [
                [tuple(turn.prompt_tokens) for turn in t.turns]
                for g in groups
                for t in g.trajectories
            ]
            with_tuples = rss_mb("VmRSS")
            turns = sum(len(t.turns) for g in groups for t in g.trajectories)
            tokens = statistics.fmean(t.tokens.total for g in groups for t in g.trajectories)
            del tuples
        finally:
            await eng.close()
        return {
            "peak_over_baseline_mb": peak - base,
            "held_over_baseline_mb": held - base,
            "tuple_prompts_extra_mb": with_tuples - held,
            "trajectories": float(sum(len(g.trajectories) for g in groups)),
            "turns_per_trajectory": turns / max(1, sum(len(g.trajectories) for g in groups)),
            "tokens_per_trajectory": tokens,
        }

    return asyncio.run(run())
