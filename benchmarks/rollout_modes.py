"""The rollout loop's own cost per turn, by template mode and tokenizers version, in one run.

    python benchmarks/rollout_modes.py [--repeats 7] [--baseline-rev REV] [--tokenizers-path DIR]

Work: 8 games x 8 branches of a corridor environment whose episodes last 20-30 steps (keyed by
the game), with ALFWorld-sized observations and eight listed actions; every turn is one call
of the one tool `alfworld_step(action)`. The sampler answers instantly with completions that
were tokenized before the clock starts (chosen by prompt length and sample index, so every
run plays the same tokens), and the environment costs a few microseconds a step: what is timed
is the engine, the renderer and the tokenizer calls they make. Modes, on the real Qwen BPE
tokenizer:

- `thinking`: Qwen3's template (`qwen3-0.6b`, JSON calls), `enable_thinking=True`, every reply
  a think block and a call;
- `instruct`: the same template with `enable_thinking=False` (its generation prompt carries an
  empty think block that a re-render drops: a safe rewrite, one segment per episode);
- `xml`: Qwen3.5's template (`qwen3.5-4b`, XML calls), thinking off.

The templates are read from `../shared/chat_templates/`; without that folder agentrl's own
Qwen3-style template stands in for all three (said in the output). Per mode, a warm-up batch
is played first (the renderer learns its tool-message frame there), then `--repeats` timed
batches; the figure is the median (and min) of wall milliseconds per turn. A separate counted
batch wraps the tokenizer to count template renders and `len(tokenizer)` calls made after each
episode's first prompt, per turn.

`--tokenizers-path DIR` runs the same measurement again in a child process with DIR first on
`sys.path`, e.g. tokenizers 0.22 (where `len(tokenizer)` costs ~50-160 ms) with the
transformers that pins it:

    pip install --target DIR --no-deps tokenizers==0.22.2 transformers==5.5.4 \
        'huggingface-hub>=1.5,<2'

Last line: `thinking_ms_per_turn=A instruct_ms_per_turn=B segments_instruct=S
renders_per_turn=R` (then `xml_ms_per_turn`, `len_calls_per_turn`, `tokenizers`, and with
`--tokenizers-path` the other version's figures and `alt_ratio`, its worst mode's ms/turn over
this version's).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.chat.dialects import DIALECTS
from agentrl.chat.history import ExtensionMode
from agentrl.chat.tokenizers import add_template_tokens, build_qwen_tokenizer
from agentrl.core.env import command_of
from agentrl.core.types import (
    Completion,
    CompletionStop,
    EnvAction,
    EnvStep,
    TaskInfo,
    TrajectoryGroup,
)
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO.parent / "shared" / "chat_templates"
BASELINE_REV = "bd90c94"
"""The last revision before the per-renderer vocabulary size and the tool-message frame."""
GAMES, BRANCHES = 8, 8
PLACES = ("countertop", "cabinet", "drawer", "shelf", "sinkbasin", "fridge", "microwave", "desk")
THOUGHT = "The {place} may hold what the task asks for; I will look there next and then decide."


@dataclass(frozen=True)
class Mode:
    """One template setting to time."""

    name: str
    template: str
    enable_thinking: bool
    think: bool
    """Whether replies carry a think block."""


def modes() -> tuple[list[Mode], str]:
    """The three modes, and which templates they use."""
    if TEMPLATES.is_dir():
        qwen3 = (TEMPLATES / "qwen3-0.6b.jinja").read_text(encoding="utf-8")
        qwen35 = (TEMPLATES / "qwen3.5-4b.jinja").read_text(encoding="utf-8")
        source = "shared qwen3-0.6b / qwen3.5-4b"
    else:
        from agentrl.chat.tokenizers.qwen import QWEN_CHAT_TEMPLATE

        qwen3 = qwen35 = QWEN_CHAT_TEMPLATE
        source = "agentrl's Qwen3-style template (../shared/chat_templates absent)"
    return [
        Mode("thinking", qwen3, True, True),
        Mode("instruct", qwen3, False, False),
        Mode("xml", qwen35, False, False),
    ], source


def observation(place: str, step: int) -> str:
    """An ALFWorld-sized observation of arriving at `place`."""
    items = ", ".join(f"a {o} {1 + (step + i) % 3}" for i, o in enumerate(("mug", "apple", "key")))
    return f"You arrive at {place} {1 + step % 4}. On the {place} {1 + step % 4}, you see {items}."


class CorridorGroup:
    """K branches walking a corridor: any listed action is executable; the episode is won
    after `length` steps."""

    actions = tuple(f"go to {p} {i}" for i, p in enumerate(PLACES, start=1))

    def __init__(self, task: TaskInfo, size: int) -> None:
        self._task, self._size = task, size
        self.length = 20 + int(task.task_id.rsplit("-", 1)[1]) * 10 // GAMES
        self._steps = [0] * size

    @property
    def task(self) -> TaskInfo:
        return self._task

    @property
    def size(self) -> int:
        return self._size

    async def reset(self) -> list[EnvStep]:
        self._steps = [0] * self._size
        first = EnvStep(observation("hallway", 0), admissible_actions=self.actions)
        return [first] * self._size

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        out = []
        for i, action in enumerate(actions):
            if action is not None:
                self._steps[i] += 1
            n = self._steps[i]
            place = command_of(action).split()[2] if action is not None else "hallway"
            won = n >= self.length
            out.append(
                EnvStep(observation(place, n), done=won, won=won, admissible_actions=self.actions)
            )
        return out

    async def close(self) -> None:
        return None


def corridor_factory(task: TaskInfo, group_size: int) -> CorridorGroup:
    """The corridor environment's `EnvGroupFactory`."""
    return CorridorGroup(task, group_size)


class PretokenizedSampler:
    """Instant replies from completions tokenized once, chosen by prompt length and index."""

    def __init__(self, renderer: ChatRenderer, think: bool) -> None:
        protocol = alfworld_tool_protocol()
        stop = renderer.stop_tokens[0]
        opened = False
        self.replies: list[Completion] = []
        for place, action in zip(PLACES, CorridorGroup.actions, strict=True):
            text = protocol.call_text(action, dialect=renderer.dialect)
            if think:
                text = renderer.dialect.reasoning_reply(
                    THOUGHT.format(place=place), text, opened=opened
                )
            tokens = (*renderer.encode(text), stop)
            self.replies.append(Completion(tokens, (-0.25,) * len(tokens), CompletionStop.STOP))

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        n = len(prompt_tokens)
        return [self.replies[(n * 31 + k * 7) % len(self.replies)] for k in range(num_samples)]


class CountingTokenizer:
    """The real tokenizer, counting `len()` calls while `counting_len` and template renders
    while `counting_renders`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counting_len = self.counting_renders = False
        self.renders = 0
        self.len_calls = 0

    def __len__(self) -> int:
        self.len_calls += self.counting_len
        return len(self.inner)

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        self.renders += self.counting_renders
        return self.inner.apply_chat_template(conversation, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def tasks() -> list[TaskInfo]:
    """The batch's games (episode lengths 20..28 steps)."""
    return [TaskInfo(f"corridor-{g}", description="Find the mug.") for g in range(GAMES)]


CONFIG = RolloutConfig(
    group_size=BRANCHES,
    max_env_steps=50,
    max_trajectory_tokens=32_000,
    max_assistant_tokens=256,
    retry_backoff=0.0,
)


async def play(renderer: ChatRenderer, sampler: PretokenizedSampler) -> list[TrajectoryGroup]:
    """One batch: every game at once."""
    return await rollout_batch(
        tasks(),
        env_factory=corridor_factory,
        sampler=sampler,
        renderer=renderer,
        protocol=alfworld_tool_protocol(),
        config=CONFIG,
        max_concurrent_groups=GAMES,
    )


def turns_of(groups: Sequence[TrajectoryGroup]) -> int:
    return sum(len(t.turns) for g in groups for t in g.trajectories)


def segments_of(groups: Sequence[TrajectoryGroup]) -> int:
    """Turns that started a new segment (beyond each episode's first)."""
    return sum(
        sum(turn.new_segment for turn in t.turns[1:]) for g in groups for t in g.trajectories
    )


def measure_mode(tokenizer: Any, mode: Mode, repeats: int) -> dict[str, Any]:
    """Timed batches, then one counted batch, of one mode."""
    renderer = ChatRenderer(
        tokenizer,
        alfworld_tool_protocol().tools,
        chat_template=mode.template,
        enable_thinking=mode.enable_thinking,
    )
    sampler = PretokenizedSampler(renderer, mode.think)
    groups = asyncio.run(play(renderer, sampler))  # warm-up: frames learned, caches filled
    assert all(t.won for g in groups for t in g.trajectories), "the corridor must be won"
    turns = turns_of(groups)
    per_turn = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        groups = asyncio.run(play(renderer, sampler))
        per_turn.append(1e3 * (time.perf_counter() - start) / turns_of(groups))
    counting = CountingTokenizer(tokenizer)
    counted = ChatRenderer(
        counting,  # type: ignore[arg-type]
        alfworld_tool_protocol().tools,
        chat_template=mode.template,
        enable_thinking=mode.enable_thinking,
    )
    counted_sampler = PretokenizedSampler(counted, mode.think)
    asyncio.run(play(counted, counted_sampler))  # the counted renderer's first batch
    counted.initial_prompt = uncounted(counted.initial_prompt, counting)  # type: ignore[method-assign]
    counting.counting_len = counting.counting_renders = True
    counted_groups = asyncio.run(play(counted, counted_sampler))
    counting.counting_len = counting.counting_renders = False
    n = turns_of(counted_groups)
    return {
        "ms_per_turn": statistics.median(per_turn),
        "ms_per_turn_min": min(per_turn),
        "turns": turns,
        "segments": segments_of(groups),
        "extension": ExtensionMode(renderer.extension).value,
        "renders_per_turn": counting.renders / n,
        "len_calls_per_turn": counting.len_calls / n,
    }


def uncounted(method: Callable[..., list[int]], counting: CountingTokenizer) -> Any:
    """`method` (the renderer's first prompt of an episode) with its template renders left out
    of the count."""

    def wrapped(*args: Any, **kwargs: Any) -> list[int]:
        counting.counting_renders = False
        try:
            return method(*args, **kwargs)
        finally:
            counting.counting_renders = True

    return wrapped


def measure(repeats: int) -> dict[str, Any]:
    """Every mode on this interpreter's tokenizers."""
    import tokenizers
    import transformers

    base = build_qwen_tokenizer()
    markers = [m for d in DIALECTS.values() for m in (*d.reserved, *d.stop_markers)]
    chosen, source = modes()
    out: dict[str, Any] = {
        "tokenizers": tokenizers.__version__,
        "transformers": transformers.__version__,
        "templates": source,
        "modes": {},
    }
    for mode in chosen:
        tokenizer = copy.deepcopy(base)
        add_template_tokens(tokenizer, mode.template, markers)
        out["modes"][mode.name] = measure_mode(tokenizer, mode, repeats)
        row = out["modes"][mode.name]
        print(
            f"tokenizers {out['tokenizers']} {mode.name:8s} ({row['extension']}): "
            f"{row['ms_per_turn']:.3f} ms/turn (min {row['ms_per_turn_min']:.3f}) over "
            f"{row['turns']} turns; new segments {row['segments']}; renders/turn "
            f"{row['renders_per_turn']:.3f}; len(tokenizer)/turn {row['len_calls_per_turn']:.3f}",
            file=sys.stderr,
            flush=True,
        )
    return out


def in_child(pythonpath: Path, repeats: int) -> dict[str, Any]:
    """The same measurement in a child process whose `sys.path` starts with `pythonpath`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    done = subprocess.run(
        [sys.executable, __file__, "--repeats", str(repeats), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def baseline_source(rev: str, folder: Path) -> Path | None:
    """agentrl's `src/` at git revision `rev`, unpacked under `folder` (None without git)."""
    try:
        archive = subprocess.run(
            ["git", "archive", rev, "src"], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return folder / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed batches per mode")
    parser.add_argument(
        "--tokenizers-path",
        type=Path,
        default=None,
        help="a folder with another tokenizers (and the transformers that pins it), measured "
        "in a child process",
    )
    parser.add_argument(
        "--baseline-rev",
        default=BASELINE_REV,
        help="the agentrl revision measured beside this one ('' to skip)",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tokenizers_path is not None and not args.tokenizers_path.is_dir():
        parser.error(f"--tokenizers-path {args.tokenizers_path}: no such folder")
    here = measure(args.repeats)
    if args.json:
        print(json.dumps(here))
        return
    baseline = None
    if args.baseline_rev:
        with tempfile.TemporaryDirectory(prefix="agentrl-baseline-") as folder:
            source = baseline_source(args.baseline_rev, Path(folder))
            if source is None:
                print(f"no git revision {args.baseline_rev}: baseline skipped", file=sys.stderr)
            else:
                print(f"baseline: agentrl at {args.baseline_rev}", file=sys.stderr, flush=True)
                baseline = in_child(source, args.repeats)
    m = here["modes"]
    fields = {
        "thinking_ms_per_turn": f"{m['thinking']['ms_per_turn']:.3f}",
        "instruct_ms_per_turn": f"{m['instruct']['ms_per_turn']:.3f}",
        "segments_instruct": str(m["instruct"]["segments"]),
        "renders_per_turn": f"{max(r['renders_per_turn'] for r in m.values()):.3f}",
        "xml_ms_per_turn": f"{m['xml']['ms_per_turn']:.3f}",
        "len_calls_per_turn": f"{max(r['len_calls_per_turn'] for r in m.values()):.3f}",
        "tokenizers": here["tokenizers"],
    }
    if baseline is not None:
        b = baseline["modes"]
        for name in ("thinking", "instruct", "xml"):
            fields[f"baseline_{name}_ms_per_turn"] = f"{b[name]['ms_per_turn']:.3f}"
            fields[f"speedup_{name}"] = f"{b[name]['ms_per_turn'] / m[name]['ms_per_turn']:.2f}"
    if args.tokenizers_path is not None:
        other = in_child(args.tokenizers_path, args.repeats)
        o = other["modes"]
        fields["alt_tokenizers"] = other["tokenizers"]
        for name in ("thinking", "instruct", "xml"):
            fields[f"alt_{name}_ms_per_turn"] = f"{o[name]['ms_per_turn']:.3f}"
        ratio = max(o[k]["ms_per_turn"] / m[k]["ms_per_turn"] for k in m)
        fields["alt_ratio"] = f"{ratio:.2f}"
    fields["load"] = f"{os.getloadavg()[0]:.1f}"  # the 1-minute load average at the end
    print(f"templates: {here['templates']}; transformers {here['transformers']}", file=sys.stderr)
    print(" ".join(f"{k}={v}" for k, v in fields.items()))


if __name__ == "__main__":
    main()
