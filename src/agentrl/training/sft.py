"""Supervised fine-tuning on conversations: the cross-entropy loss on the assistant's tokens only.

`read_conversations` reads a JSONL of OpenAI-format conversations (`{"messages": [...],
"tools": [...]}` per line; assistant tool calls are written in the model family's dialect, the
text the model would emit); `sft_examples` renders each with the chat template
(`agentrl.chat.conversation`) and builds its datums (`agentrl.algo.datums.supervised_datums`:
mask 1 on assistant tokens, 0 on system, user and tool tokens); `held_out_split` keeps a keyed
share of the lines for the eval loss. `SupervisedTrainer` then runs the steps: per epoch a
keyed shuffle (`derive_seed(seed, "sft", epoch)`), `batch_size` conversations per step, one
`forward_backward` (cross entropy) and one `optim_step`, the eval loss (the current weights'
logprobs of the held-out assistant tokens, through the sampler's `compute_logprobs`) every
`eval_every` steps and after each epoch, a checkpoint every `save_every` steps and at the end
(`<run_dir>/checkpoints/step-NNNN.json`, accepted by `agentrl eval --model-path`).

`metrics.jsonl` has one record per step (`step`, `epoch`, `train/loss` per assistant token,
`train/tokens`, `eval/loss` where measured, `seconds`). With `resume`, the latest checkpoint is
loaded, records of steps after it are dropped and the run continues with the next step of the
same order; an interrupt saves the last completed step first (the CLI: exit 130 / 143).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from agentrl.algo.datums import Datum, supervised_datums
from agentrl.algo.distillation import datum_tokens, teacher_targets
from agentrl.backends.base import LossConfig, LossName, Teacher, TrainingBackend
from agentrl.chat import ChatRenderer, ChatTemplateError
from agentrl.chat.conversation import render_conversation
from agentrl.chat.dialects import ToolCallDialect
from agentrl.chat.openai_messages import OpenAIMessageError, conversation_messages
from agentrl.config import TrainConfig
from agentrl.config.sft import SftOptions
from agentrl.core.progress import progress_bar
from agentrl.core.seeds import derive_seed
from agentrl.core.types import JsonObject, Message
from agentrl.store.jsonl import JsonlWriter, WriteMode, numbered_jsonl
from agentrl.store.lock import OutputLock
from agentrl.training.checkpoints import (
    METRICS_FILE,
    RUN_FILE,
    CheckpointInfo,
    checkpoint_info,
    commit_checkpoint,
)
from agentrl.training.resume import read_run_file, start_run

__all__ = [
    "Conversation",
    "SftExample",
    "SftResult",
    "SftStep",
    "SupervisedTrainer",
    "eval_loss",
    "held_out_split",
    "read_conversations",
    "sft_examples",
    "step_batches",
]


@dataclass(frozen=True)
class Conversation:
    """One conversation of a JSONL file: its messages, its tools, where it was read."""

    messages: tuple[Message, ...]
    tools: tuple[JsonObject, ...] | None
    """The line's `tools` (None: the line has none; the renderer's own)."""
    where: str
    """`file:line`, for errors and records."""


def read_conversations(path: Path, dialect: ToolCallDialect) -> list[Conversation]:
    """The conversations of a JSONL file; a malformed line raises ValueError naming the file,
    the line and the field (`data.jsonl:3: messages[2].tool_calls[0].function.arguments ...`)."""
    path = Path(path)
    out: list[Conversation] = []
    for number, record in numbered_jsonl(path):
        where = f"{path}:{number}"
        messages, tools = record.get("messages"), record.get("tools")
        if not isinstance(messages, list) or not messages:
            raise ValueError(f'{where}: expected {{"messages": [...]}} with at least one message')
        if tools is not None and not (
            isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
        ):
            raise ValueError(f"{where}: tools must be a list of tool schemas (JSON objects)")
        if not all(isinstance(m, dict) for m in messages):
            raise ValueError(f"{where}: every entry of messages must be a JSON object")
        try:
            parsed = conversation_messages(messages, dialect)  # type: ignore[arg-type]
        except OpenAIMessageError as exc:
            raise ValueError(f"{where}: {exc.message}") from None
        listed = None if tools is None else tuple(t for t in tools if isinstance(t, dict))
        out.append(Conversation(tuple(parsed), listed, where))
    if not out:
        raise ValueError(f"{path}: no conversations (one JSON object per line)")
    return out


@dataclass(frozen=True)
class SftExample:
    """A rendered conversation: its datums (one per segment) and where it came from."""

    where: str
    datums: tuple[Datum, ...]

    @property
    def tokens(self) -> int:
        """Assistant (trained) tokens."""
        return sum(d.num_assistant_tokens for d in self.datums)


def sft_examples(
    conversations: Sequence[Conversation], renderer: ChatRenderer, *, max_tokens: int
) -> list[SftExample]:
    """Each conversation rendered and turned into datums; one longer than `max_tokens` (a
    segment), or one the template cannot render, raises ValueError naming its line."""
    examples = []
    for conversation in conversations:
        try:
            rendered = render_conversation(renderer, conversation.messages, conversation.tools)
        except ChatTemplateError as exc:
            raise ValueError(f"{conversation.where}: {exc}") from None
        if rendered.longest_segment > max_tokens:
            raise ValueError(
                f"{conversation.where}: {rendered.longest_segment} tokens, more than "
                f"--max-trajectory-tokens {max_tokens}: raise it or shorten the conversation"
            )
        datums = supervised_datums(rendered, conversation.where)
        examples.append(SftExample(conversation.where, tuple(datums)))
    return examples


def held_out_split(
    examples: Sequence[SftExample], fraction: float, seed: int
) -> tuple[list[SftExample], list[SftExample]]:
    """(train, held out): an example is held out when the keyed hash of its position falls
    under `fraction`, so the split depends only on the file and the seed. With 2 or more
    examples and `fraction > 0` each side has at least one."""
    if fraction <= 0 or len(examples) < 2:
        return list(examples), []
    scores = [derive_seed(seed, "sft-held-out", i) / 2**63 for i in range(len(examples))]
    held = {i for i, s in enumerate(scores) if s < fraction}
    if not held:
        held = {min(range(len(scores)), key=scores.__getitem__)}
    if len(held) == len(examples):
        held.discard(max(held, key=scores.__getitem__))
    train = [e for i, e in enumerate(examples) if i not in held]
    return train, [e for i, e in enumerate(examples) if i in held]


def step_batches(
    count: int, batch_size: int, epochs: int, seed: int
) -> list[tuple[int, list[int]]]:
    """(epoch, example indices) of every step: each epoch a keyed shuffle of `range(count)`
    cut into batches of `batch_size` (the last one smaller)."""
    steps: list[tuple[int, list[int]]] = []
    for epoch in range(1, epochs + 1):
        order = list(range(count))
        random.Random(derive_seed(seed, "sft", epoch)).shuffle(order)
        steps += [(epoch, order[i : i + batch_size]) for i in range(0, count, batch_size)]
    return steps


async def eval_loss(scorer: Teacher, datums: Sequence[Datum]) -> float:
    """Mean negative logprob per assistant token of `datums` under `scorer` (the current
    weights' sampler), scored concurrently."""
    answers = await asyncio.gather(*(scorer.compute_logprobs(datum_tokens(d)) for d in datums))
    total, tokens = 0.0, 0.0
    for datum, scored in zip(datums, answers, strict=True):
        on = datum.mask > 0
        total -= float(teacher_targets(datum, scored)[on].astype(np.float64).sum())
        tokens += float(on.sum())
    return total / tokens if tokens else math.nan


@dataclass(frozen=True)
class SftStep:
    """What one step did (one record of `metrics.jsonl`)."""

    step: int
    epoch: int
    loss: float
    """Cross entropy per assistant token of the step's batch."""
    tokens: int
    eval_loss: float | None
    seconds: float

    def record(self) -> JsonObject:
        out: JsonObject = {
            "step": self.step,
            "epoch": self.epoch,
            "train/loss": self.loss,
            "train/tokens": self.tokens,
            "seconds": self.seconds,
        }
        if self.eval_loss is not None:
            out["eval/loss"] = self.eval_loss
        return out


@dataclass(frozen=True)
class SftResult:
    """What `SupervisedTrainer.run` did."""

    steps: tuple[SftStep, ...]
    checkpoints: tuple[CheckpointInfo, ...]
    last_step: int
    first_eval_loss: float | None
    """The eval loss before the first step of this call (None without held-out data)."""


def data_fingerprint(examples: Sequence[SftExample]) -> str:
    """A hash of the training datums' tokens and masks (a resumed run must train the same)."""
    digest = hashlib.sha256()
    for example in examples:
        for datum in example.datums:
            digest.update(datum.target_tokens.tobytes())
            digest.update(datum.mask.tobytes())
    return digest.hexdigest()[:16]


class SupervisedTrainer:
    """The steps of one supervised fine-tuning run (see the module docstring)."""

    def __init__(
        self,
        *,
        config: TrainConfig,
        options: SftOptions,
        backend: TrainingBackend,
        train: Sequence[SftExample],
        held_out: Sequence[SftExample] = (),
        progress: bool = True,
    ) -> None:
        if not train:
            raise ValueError("supervised fine-tuning needs at least one training conversation")
        self.config = config
        self.options = options
        self.backend = backend
        self.train = list(train)
        self.held_out = [d for e in held_out for d in e.datums]
        self.progress = progress
        self.run_dir = Path(config.run_dir)
        self.steps = step_batches(len(self.train), options.batch_size, options.epochs, config.seed)
        self.adam = replace(config.adam_params(), learning_rate=options.learning_rate)
        self.completed = 0
        self.last_saved: CheckpointInfo | None = None

    @property
    def total_steps(self) -> int:
        return len(self.steps)

    def _state(self) -> JsonObject:
        return {
            "config": self.config.model_dump(mode="json"),
            "sft": json.loads(self.options.model_dump_json()),
            "tasks": len(self.train),
            "tasks_fingerprint": data_fingerprint(self.train),
        }

    async def eval_loss(self) -> float | None:
        """The held-out loss of the current weights (None without held-out conversations)."""
        if not self.held_out:
            return None
        sampler = await self.backend.sampler()
        if not isinstance(sampler, Teacher):
            raise TypeError(f"{type(sampler).__name__} cannot score tokens (compute_logprobs)")
        return await eval_loss(sampler, self.held_out)

    async def _step(self, number: int) -> SftStep:
        clock = time.perf_counter()
        epoch, indices = self.steps[number - 1]
        datums = [d for i in indices for d in self.train[i].datums]
        result = await self.backend.forward_backward(datums, LossName.CROSS_ENTROPY, LossConfig())
        await self.backend.optim_step(self.adam)
        last_of_epoch = number == len(self.steps) or self.steps[number][0] != epoch
        every = self.options.eval_every
        measure = last_of_epoch or (every > 0 and number % every == 0)
        held = await self.eval_loss() if measure else None
        return SftStep(
            number, epoch, result.loss, result.num_tokens, held, time.perf_counter() - clock
        )

    async def save(self, number: int) -> CheckpointInfo:
        name = f"step-{number:04d}"
        ref = await self.backend.save(name)
        info = checkpoint_info(self.config, number, name, ref)
        commit_checkpoint(self.run_dir, info)
        self.last_saved = info
        return info

    async def run(self) -> SftResult:
        """Run (or resume) every step; the run folder is locked meanwhile."""
        with OutputLock(self.run_dir, what="run folder", folder=True):
            return await self._run()

    def _check_same_steps(self, state: JsonObject) -> None:
        """Refuse to resume a run whose steps would differ (names the flags)."""
        run_file = self.run_dir / RUN_FILE
        if not self.config.resume or not run_file.exists():
            return
        before = read_run_file(run_file)
        old = before.get("sft") if isinstance(before.get("sft"), dict) else {}
        assert isinstance(old, dict)
        problems = []
        if old.get("batch_size") != self.options.batch_size:
            problems.append(f"--batch-size {old.get('batch_size')} -> {self.options.batch_size}")
        if before.get("tasks_fingerprint") != state["tasks_fingerprint"]:
            problems.append(
                f"the training conversations changed ({before.get('tasks')} -> {state['tasks']})"
            )
        if problems:
            raise ValueError(
                f"cannot resume {self.run_dir}: the steps would change: " + "; ".join(problems)
            )

    async def _run(self) -> SftResult:
        state = self._state()
        self._check_same_steps(state)
        latest = await start_run(self.backend, self.config, state)
        self.completed = 0 if latest is None else latest.update
        self.last_saved = latest
        first = await self.eval_loss() if self.completed == 0 else None
        done: list[SftStep] = []
        saved: list[CheckpointInfo] = []
        bar = (
            progress_bar(total=self.total_steps, initial=self.completed, desc="sft", unit="step")
            if self.progress
            else None
        )
        try:
            with JsonlWriter(self.run_dir / METRICS_FILE, WriteMode.APPEND) as metrics:
                for number in range(self.completed + 1, self.total_steps + 1):
                    work = asyncio.ensure_future(self._step(number))
                    try:
                        step = await asyncio.shield(work)
                    except asyncio.CancelledError:  # a started step changes the weights:
                        metrics.write((await work).record())  # count it, then stop
                        self.completed = number
                        raise
                    self.completed = number
                    metrics.write(step.record())
                    done.append(step)
                    if bar is not None:
                        bar.set_postfix(loss=f"{step.loss:.3f}", refresh=False)
                        bar.update(1)
                    if number % self.config.save_every == 0 or number == self.total_steps:
                        saved.append(await self.save(number))
        except (asyncio.CancelledError, KeyboardInterrupt):
            if self.completed and (
                self.last_saved is None or self.last_saved.update < self.completed
            ):
                saved.append(await asyncio.shield(self.save(self.completed)))
            raise
        finally:
            if bar is not None:
                bar.close()
        return SftResult(tuple(done), tuple(saved), self.completed, first)
