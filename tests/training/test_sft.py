"""Supervised fine-tuning: conversations rendered with a real chat template, the loss on the
assistant's tokens only, keyed steps, eval loss, checkpoints and an identical resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentrl.algo.datums import Datum, supervised_datums
from agentrl.chat import ChatRenderer
from agentrl.chat.conversation import render_conversation
from agentrl.chat.openai_messages import conversation_messages

pytest.importorskip("torch")
pytest.importorskip("transformers")

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up a fruit.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string"}},
                "required": ["word"],
            },
        },
    }
]
COLOURS = {"apple": "red", "pear": "green", "plum": "purple", "fig": "brown"}


def conversation(word: str) -> dict[str, Any]:
    """A two-reply conversation with a tool call, in the OpenAI format."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ""}}
    call["function"]["arguments"] = json.dumps({"word": word})
    return {
        "messages": [
            {"role": "system", "content": "You name the colour of a fruit."},
            {"role": "user", "content": f"What colour is a {word}?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": f"{word}: {COLOURS[word]}"},
            {"role": "assistant", "content": f"The answer is {COLOURS[word]}."},
        ],
        "tools": TOOLS,
    }


def write_data(path: Path, count: int) -> Path:
    words = sorted(COLOURS)
    lines = [json.dumps(conversation(words[i % len(words)])) for i in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_only_the_assistant_tokens_are_trained(qwen_tokenizer: Any) -> None:
    """With Qwen's real tokenizer and its Qwen3.5-style template: the trained tokens decode to
    exactly the two replies (the call in the XML dialect) each with its stop token, and all
    the tokens decode to the template's own render of the conversation."""
    renderer = ChatRenderer(qwen_tokenizer, TOOLS)
    messages = conversation_messages(conversation("plum")["messages"], renderer.dialect)
    rendered = render_conversation(renderer, messages, TOOLS)
    (segment,) = rendered.segments
    trained = [qwen_tokenizer.decode(list(p.tokens)) for p in segment if p.trained]
    call = "<tool_call>\n<function=lookup>\n<parameter=word>\nplum\n</parameter>\n</function>"
    call += "\n</tool_call>"
    assert renderer.dialect.name == "qwen_xml"  # the project's Qwen3.5-style template
    assert trained == [f"{call}<|im_end|>", "The answer is purple.<|im_end|>"]
    everything = qwen_tokenizer.decode([t for p in segment for t in p.tokens])
    from agentrl.chat.base import message_to_dict

    dicts = [message_to_dict(m) for m in messages]
    assert everything == renderer.render_text(dicts, tools=TOOLS)
    context = qwen_tokenizer.decode([t for p in segment if not p.trained for t in p.tokens])
    assert "You name the colour" in context and "plum: purple" in context
    assert "is purple." not in context and "<parameter=word>\nplum" not in context
    (datum,) = supervised_datums(rendered)
    assert datum.num_assistant_tokens == sum(len(p.tokens) for p in segment if p.trained)
    assert np.array_equal(datum.advantages, datum.mask)


def _loss(backend: Any, datum: Datum) -> float:
    import asyncio

    from agentrl.backends.base import LossConfig, LossName

    result = asyncio.run(backend.forward_backward([datum], LossName.CROSS_ENTROPY, LossConfig()))
    return float(result.loss)


def test_a_flipped_mask_bit_changes_the_loss_only_where_it_should(
    qwen_tokenizer: Any, tmp_path: Path
) -> None:
    """On the local backend's real forward pass: changing the target of a context position
    leaves the loss as it was; changing an assistant target, or turning a context position's
    mask bit on, changes it."""
    from dataclasses import replace

    from agentrl.backends.local import LocalBackend

    renderer = ChatRenderer(qwen_tokenizer, TOOLS)
    messages = conversation_messages(conversation("fig")["messages"], renderer.dialect)
    (datum,) = supervised_datums(render_conversation(renderer, messages, TOOLS))
    backend = LocalBackend.tiny(qwen_tokenizer, seed=0, device="cpu", checkpoint_dir=tmp_path)
    base = _loss(backend, datum)
    context = int(np.flatnonzero(datum.mask == 0)[3])
    reply = int(np.flatnonzero(datum.mask == 1)[2])

    def with_target(position: int) -> Datum:
        targets = datum.target_tokens.copy()
        targets[position] = (targets[position] + 7) % len(qwen_tokenizer)
        return replace(datum, target_tokens=targets)

    assert _loss(backend, with_target(context)) == pytest.approx(base, abs=1e-7)
    assert abs(_loss(backend, with_target(reply)) - base) > 1e-4
    mask = datum.mask.copy()
    mask[context] = 1.0
    assert abs(_loss(backend, replace(datum, mask=mask, advantages=mask.copy())) - base) > 1e-4


def test_a_bad_line_is_named_with_its_field(tmp_path: Path) -> None:
    from agentrl.chat.dialects import dialect_for
    from agentrl.training.sft import read_conversations

    data = write_data(tmp_path / "data.jsonl", 3)
    lines = data.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["messages"][2]["tool_calls"][0]["function"]["arguments"] = "{not json"
    lines[1] = json.dumps(bad)
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"data\.jsonl:2: messages\[2\]\.tool_calls\[0\]"):
        read_conversations(data, dialect_for("qwen_json"))
    data.write_text('{"messages": []}\n')
    with pytest.raises(ValueError, match=r"data\.jsonl:1: expected"):
        read_conversations(data, dialect_for("qwen_json"))


def test_the_held_out_split_and_the_steps_are_keyed() -> None:
    from agentrl.training.sft import SftExample, held_out_split, step_batches

    examples = [SftExample(f"line {i}", ()) for i in range(50)]
    train, held = held_out_split(examples, 0.2, seed=3)
    assert held_out_split(examples, 0.2, seed=3) == (train, held)
    assert {e.where for e in train}.isdisjoint(e.where for e in held)
    assert len(train) + len(held) == 50 and 3 <= len(held) <= 20
    assert held_out_split(examples, 0.2, seed=4)[1] != held
    steps = step_batches(10, 4, 2, seed=1)
    assert [(e, len(b)) for e, b in steps] == [(1, 4), (1, 4), (1, 2), (2, 4), (2, 4), (2, 2)]
    assert sorted(i for _, b in steps[:3] for i in b) == list(range(10))
    assert step_batches(10, 4, 1, seed=1) == steps[:3]  # more epochs keep the first one's order


def _sft(tmp_path: Path, run: str, *flags: str) -> tuple[int, str]:
    import contextlib
    import io

    from agentrl.cli.app import main

    data = tmp_path / "data.jsonl"
    if not data.exists():
        write_data(data, 9)
    out = io.StringIO()
    argv = ["sft", "--data", str(data), "--base-model", "tiny", "--device", "cpu"]
    argv += ["--run-dir", str(tmp_path / run), "--batch-size", "4", "--learning-rate", "3e-3"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main([*argv, *flags])
    return status, out.getvalue()


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_sft_lowers_the_eval_loss_and_resumes_identically(tmp_path: Path) -> None:
    """`agentrl sft` on the tiny model: the held-out loss falls; a run stopped after epoch 1
    and resumed to epoch 2 has each step once and ends on the weights of an unbroken run."""
    import re

    from safetensors.numpy import load_file

    status, out = _sft(tmp_path, "whole", "--epochs", "2")
    assert status == 0, out
    before, after = map(float, re.search(r"eval loss .*: ([\d.]+) -> ([\d.]+)", out).groups())
    assert after < before - 0.05, out
    assert [s["step"] for s in _steps(tmp_path / "whole")] == [1, 2, 3, 4]
    assert _sft(tmp_path, "parts", "--epochs", "1")[0] == 0
    status, out = _sft(tmp_path, "parts", "--epochs", "2", "--resume")
    assert status == 0, out
    assert [s["step"] for s in _steps(tmp_path / "parts")] == [1, 2, 3, 4]
    whole = load_file(tmp_path / "whole/checkpoints/step-0004/sampler/adapter_model.safetensors")
    parts = load_file(tmp_path / "parts/checkpoints/step-0004/sampler/adapter_model.safetensors")
    assert whole.keys() == parts.keys()
    for name in whole:
        assert np.array_equal(whole[name], parts[name]), name
    status, out = _sft(tmp_path, "parts", "--epochs", "2", "--resume", "--batch-size", "3")
    assert status == 1 and "the steps would change: --batch-size 4 -> 3" in out, out


def test_sft_help() -> None:
    import contextlib
    import io

    from agentrl.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["sft", "--help"])
    assert "--data PATH" in out.getvalue() and "--eval-fraction" in out.getvalue()


async def test_a_cancelled_run_saves_its_last_step_and_resumes(
    qwen_tokenizer: Any, tmp_path: Path
) -> None:
    """Cancelled mid-run (what SIGINT / SIGTERM do), the run saves the step it completed, each
    recorded step is saved, and the resumed run records every step once."""
    import asyncio

    from agentrl.backends.local import LocalBackend
    from agentrl.config import TrainConfig
    from agentrl.config.sft import SftOptions
    from agentrl.training.checkpoints import latest_checkpoint
    from agentrl.training.sft import SupervisedTrainer, read_conversations, sft_examples

    data = write_data(tmp_path / "data.jsonl", 8)
    renderer = ChatRenderer(qwen_tokenizer)
    examples = sft_examples(read_conversations(data, renderer.dialect), renderer, max_tokens=4000)
    options = SftOptions(data=data, batch_size=2, epochs=2, eval_fraction=0.0)
    run_dir = tmp_path / "run"

    def trainer(resume: bool) -> SupervisedTrainer:
        config = TrainConfig(
            base_model="tiny", backend="local", device="cpu", run_dir=run_dir, resume=resume
        )
        backend = LocalBackend.tiny(
            qwen_tokenizer, seed=0, device="cpu", checkpoint_dir=run_dir / "checkpoints"
        )
        return SupervisedTrainer(
            config=config, options=options, backend=backend, train=examples, progress=False
        )

    first = trainer(resume=False)
    task = asyncio.ensure_future(first.run())
    while not (run_dir / "metrics.jsonl").exists() or not _steps(run_dir):
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stopped = len(_steps(run_dir))
    assert 1 <= stopped < 8 and first.completed == stopped
    saved = latest_checkpoint(run_dir)
    assert saved is not None and saved.update == stopped
    result = await trainer(resume=True).run()
    assert result.last_step == 8
    assert [s["step"] for s in _steps(run_dir)] == list(range(1, 9))
