"""The gateway's own overhead per call, against calling the same sampler directly.

One run, a zero-latency sampler (fixed token ids, no model), the real Qwen tokenizer and chat
template. The gateway runs in a server process of its own (`--serve`), the agents in this one
(raw HTTP with httpx, so the client's own parsing is not counted).

- **overhead**: one 20-turn episode at a time (no queueing behind other sessions), each call
  timed at the client, minus the direct call of the same sampler on the same prompt (timed in
  this process). Reported at turn 20 (the longest history), p50 and p95 over the episodes.
- **throughput**: 64 concurrent sessions of 20-turn episodes; calls per second.
- **exact**: every trajectory the server recorded extends its prompts turn by turn (no new
  segment) and its tokens equal the rollout engine's rule applied to the same replies:
  initial prompt, then each completion and `ChatRenderer.continuation` of its tool message.

Repeated `--repeats` times; min and median of the repeats are printed. Last line:
`overhead_ms_p50=X overhead_ms_p95=Y calls_per_s=Z exact=true`.

    python benchmarks/gateway.py [--episodes 8] [--sessions 64] [--turns 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.chat.tokenizers import build_qwen_tokenizer
from agentrl.core.types import Completion, CompletionStop, Message, ToolCall, Trajectory

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "step",
            "description": "Run one command in the environment.",
            "parameters": {
                "type": "object",
                "properties": {"action": {"type": "string", "description": "the command"}},
                "required": ["action"],
            },
        },
    }
]
SYSTEM = "You are in a house. Do the task by calling the step tool, one call per turn."
TASK = "Your task is to put a clean mug in the coffee machine."


def observation(turn: int) -> str:
    """A tool result of ALFWorld's length."""
    return (
        f"You arrive at countertop {turn}. On the countertop {turn}, you see a apple 1, a "
        f"bread 2, a butterknife {turn}, a cellphone 1, a creditcard 3, and a mug {turn}."
    )


class FixedSampler:
    """Zero latency: the same reply tokens for every prompt."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = tuple(tokens)
        self.logprobs = tuple(-0.5 for _ in self.tokens)

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        return [
            Completion(self.tokens, self.logprobs, CompletionStop.STOP) for _ in range(num_samples)
        ]


def reply_tokens(renderer: ChatRenderer) -> list[int]:
    """The fixed reply: a call of `step`, then the template's closing token."""
    text = renderer.dialect.write(ToolCall("step", {"action": "go to countertop 1"}))
    return [*renderer.encode(text), renderer.stop_tokens[0]]


def expected_tokens(renderer: ChatRenderer, reply: Sequence[int], turns: int) -> list[int]:
    """The rollout engine's tokens of an episode of `turns` fixed replies."""
    messages = [Message("system", SYSTEM), Message("user", TASK)]
    tokens = renderer.initial_prompt(messages, TOOLS)
    for turn in range(1, turns):
        tool = Message("tool", observation(turn), name="step")
        tokens += [*reply, *renderer.continuation(reply, [tool])]
    return [*tokens, *reply]


def exact(trajectory: Trajectory, expected: Sequence[int]) -> bool:
    turns = trajectory.turns
    extends = all(
        tuple(b.prompt_tokens[: len(a.prompt_tokens) + len(a.completion_tokens)])
        == tuple(a.prompt_tokens) + a.completion_tokens
        for a, b in itertools.pairwise(turns)
    )
    segments = any(t.new_segment for t in turns)
    return extends and not segments and list(trajectory.full_tokens) == list(expected)


# -- the server process ------------------------------------------------------------------------


async def serve(turns: int, report: Path) -> None:
    from agentrl.gateway import Gateway, GatewayServer
    from agentrl.rollout import RolloutConfig

    tokenizer = build_qwen_tokenizer()
    renderer = ChatRenderer(tokenizer, TOOLS)
    reply = reply_tokens(renderer)
    expected = expected_tokens(renderer, reply, turns)
    config = RolloutConfig(group_size=1, max_trajectory_tokens=32_000, max_assistant_tokens=64)
    gateway = Gateway.for_tokenizer(
        tokenizer, sampler=FixedSampler(reply), config=config, open_sessions=True
    )
    results: list[bool] = []

    def check(trajectory: Trajectory) -> None:
        results.append(exact(trajectory, expected) and len(trajectory.turns) == turns)
        report.write_text(json.dumps({"checked": len(results), "exact": all(results)}))

    async with GatewayServer(gateway, on_trajectory=check) as server:
        print(server.base_url, flush=True)
        await asyncio.Event().wait()


# -- the agents --------------------------------------------------------------------------------


async def episode(http: Any, base: str, name: str, turns: int, times: list[float] | None) -> None:
    """One agent: `turns` calls, each history the last one plus the reply and a tool result."""
    url = f"{base}/s/{name}/v1/chat/completions"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for turn in range(1, turns + 1):
        body = {"model": "agentrl", "messages": messages, "tools": TOOLS, "max_tokens": 64}
        clock = time.perf_counter()
        response = await http.post(url, json=body)
        seconds = time.perf_counter() - clock
        response.raise_for_status()
        if times is not None:
            times.append(seconds)
        message = response.json()["choices"][0]["message"]
        messages.append(message)
        if turn < turns:
            call = message["tool_calls"][0]
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": observation(turn)}
            )
    (await http.post(f"{base}/sessions/{name}/end", json={"reward": 1.0})).raise_for_status()


async def direct_ms(turns: int, calls: int) -> float:
    """Median ms of the sampler called directly on the turn-`turns` prompt."""
    tokenizer = build_qwen_tokenizer()
    renderer = ChatRenderer(tokenizer, TOOLS)
    reply = reply_tokens(renderer)
    prompt = expected_tokens(renderer, reply, turns)[: -len(reply)]
    sampler = FixedSampler(reply)
    params = SamplingParams(max_tokens=64)
    times = []
    for _ in range(calls):
        clock = time.perf_counter()
        await sampler.sample(prompt, 1, params)
        times.append(time.perf_counter() - clock)
    return statistics.median(times) * 1000


async def measure(base: str, args: argparse.Namespace, repeat: int) -> tuple[list[float], float]:
    import httpx

    limits = httpx.Limits(max_connections=args.sessions, max_keepalive_connections=args.sessions)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        last: list[float] = []
        for i in range(args.episodes):
            times: list[float] = []
            await episode(http, base, f"seq{repeat}-{i}", args.turns, times)
            last.append(times[-1])
        clock = time.perf_counter()
        await asyncio.gather(
            *(
                episode(http, base, f"con{repeat}-{i}", args.turns, None)
                for i in range(args.sessions)
            )
        )
        wall = time.perf_counter() - clock
    return last, args.sessions * args.turns / wall


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.turns, args.serve))
        return
    scratch = tempfile.TemporaryDirectory(prefix="agentrl-gateway-bench-")
    report = Path(scratch.name) / "checked.json"
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(report), "--turns", str(args.turns)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        if not base.startswith("http"):
            raise SystemExit("the gateway server did not start")
        direct = asyncio.run(direct_ms(args.turns, 200))
        p50s, p95s, rates = [], [], []
        for repeat in range(args.repeats):
            last, rate = asyncio.run(measure(base, args, repeat))
            overhead = [t * 1000 - direct for t in last]
            p50s.append(statistics.median(overhead))
            p95s.append(percentile(overhead, 0.95))
            rates.append(rate)
            print(
                f"repeat {repeat + 1}: turn-{args.turns} overhead p50 {p50s[-1]:.2f} ms, p95 "
                f"{p95s[-1]:.2f} ms (direct sampler {direct:.3f} ms); {args.sessions} sessions: "
                f"{rate:.0f} calls/s",
                flush=True,
            )
        time.sleep(0.5)
        checked = json.loads(report.read_text())
    finally:
        server.terminate()
        server.wait(timeout=30)
        scratch.cleanup()
    episodes = args.repeats * (args.episodes + args.sessions)
    ok = checked["exact"] and checked["checked"] == episodes
    print(
        f"overhead p50 min {min(p50s):.2f} / median {statistics.median(p50s):.2f} ms; p95 min "
        f"{min(p95s):.2f} / median {statistics.median(p95s):.2f} ms; calls/s min {min(rates):.0f}"
        f" / median {statistics.median(rates):.0f}; {checked['checked']} trajectories checked"
    )
    print(
        f"overhead_ms_p50={statistics.median(p50s):.2f} "
        f"overhead_ms_p95={statistics.median(p95s):.2f} "
        f"calls_per_s={statistics.median(rates):.0f} exact={str(ok).lower()}"
    )


if __name__ == "__main__":
    main()
