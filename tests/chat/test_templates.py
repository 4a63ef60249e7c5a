"""Every real chat template in ../shared/chat_templates: build, dialect, 6-turn episodes.

The real tokenizers of non-Qwen families are not available offline: the Qwen tokenizer plus the
family's control tokens (`add_template_tokens`) stands in, so control tokens are single tokens.
Skips when the folder is absent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentrl.chat import ChatRenderer
from agentrl.chat.dialects import DIALECTS
from agentrl.chat.history import ExtensionMode, drop_think_blocks
from agentrl.datums import trajectory_to_datums
from agentrl.envs.toy import toy_tool_protocol
from agentrl.types import Message, ParsedAction, TaskInfo, ToolCall, Trajectory, Turn, TurnStatus
from tests.helpers.paths import SHARED

FOLDER = Path(
    os.environ.get(
        "AGENTRL_CHAT_TEMPLATES",
        SHARED / "chat_templates",
    )
)
TEMPLATES = sorted(FOLDER.glob("*.jinja")) if FOLDER.is_dir() else []
EXPECTED = {
    "qwen3.5-4b": ("qwen_xml", True),
    "qwen3-0.6b": ("qwen_json", True),
    "qwen3-coder": ("qwen_xml", False),
    "qwen2.5-7b-instruct": ("qwen_json", False),
    "llama-3.1-8b-instruct": ("llama3_json", False),
    "deepseek-v3.1": ("deepseek_v3", False),
    "glm-4.6": ("glm4", False),
    "gpt-oss-120b": ("harmony", False),
    "kimi-k2-instruct": ("kimi_k2", False),
}
"""Template -> (detected dialect, whether the family has Qwen's `enable_thinking`)."""
PROTOCOL = toy_tool_protocol()
TOOL = PROTOCOL.name

pytestmark = pytest.mark.skipif(not TEMPLATES, reason=f"no chat templates in {FOLDER}")


@pytest.fixture(scope="module")
def family_tokenizers(qwen_tokenizer: Any) -> dict[str, Any]:
    import copy

    from agentrl.tokenizer import add_template_tokens

    markers = [m for d in DIALECTS.values() for m in (*d.reserved, *d.stop_markers)]
    out = {}
    for path in TEMPLATES:
        tok = copy.deepcopy(qwen_tokenizer)
        add_template_tokens(tok, path.read_text(encoding="utf-8"), markers)
        out[path.stem] = tok
    return out


def cases() -> list[Any]:
    out = []
    for path in TEMPLATES:
        dialect, thinks = EXPECTED.get(path.stem, (None, False))
        out.append(pytest.param(path, dialect, False, id=path.stem))
        if thinks:
            out.append(pytest.param(path, dialect, True, id=f"{path.stem}-thinking"))
    return out


def episode(
    renderer: ChatRenderer, tok: Any, thinking: bool
) -> tuple[list[Message], list[Turn], list[int]]:
    """Six turns written in the family's own call format, grown as the rollout grows them."""
    dialect = renderer.dialect
    stop = tok.convert_tokens_to_ids(dialect.stop_markers[0])
    assert stop in renderer.stop_tokens, (dialect.stop_markers[0], renderer.stop_tokens)
    messages = [
        Message(role="system", content=PROTOCOL.system_prompt),
        Message(role="user", content="Step 0 of 6.\nObservation:\nYou are in a room."),
    ]
    prompt = renderer.initial_prompt(messages, PROTOCOL.tools)
    opened = dialect.think is not None and tok.decode(prompt).rstrip().endswith(dialect.think[0])
    turns: list[Turn] = []
    fresh = False
    for k in range(6):
        call = ToolCall(TOOL, {PROTOCOL.parameter: f"go to desk {k}"})
        reply = dialect.write(call)
        if thinking:
            reply = dialect.reasoning_reply(f"Step {k}: the desk.", reply, opened=opened)
        completion = [*renderer.encode(reply), stop]
        text = renderer.completion_text(completion)
        assert text == reply
        parsed = dialect.parse(text, tools={TOOL})
        assert parsed.calls == (call,), parsed
        turns.append(
            Turn(
                prompt_tokens=tuple(prompt),
                completion_tokens=tuple(completion),
                logprobs=tuple(-0.5 for _ in completion),
                assistant_text=text,
                parsed=ParsedAction(action=call.arguments[PROTOCOL.parameter], call=call),
                status=TurnStatus.EXECUTED,
                env_step=None,
                new_segment=fresh,
            )
        )
        tool = Message(role="tool", name=TOOL, content=f"Status: executed. You see desk {k}.")
        messages += [Message(role="assistant", content=text), tool]
        if renderer.segments:
            prompt, fresh = renderer.segment_prompt(messages, PROTOCOL.tools), True
        else:
            prompt = renderer.extend(prompt, completion, tool)
    return messages, turns, prompt


@pytest.mark.parametrize(("path", "dialect", "thinking"), cases())
def test_template_episode(
    path: Path, dialect: str | None, thinking: bool, family_tokenizers: dict[str, Any]
) -> None:
    tok = family_tokenizers[path.stem]
    template = path.read_text(encoding="utf-8")
    renderer = ChatRenderer(tok, PROTOCOL.tools, chat_template=template, enable_thinking=thinking)
    assert renderer.dialect.name == dialect
    messages, turns, last_prompt = episode(renderer, tok, thinking)
    if renderer.extension is ExtensionMode.EXTENDS:
        assert last_prompt == renderer.render(messages, add_generation_prompt=True)
    elif renderer.extension is ExtensionMode.SAFE_REWRITE:
        fresh = tok.decode(renderer.render(messages, add_generation_prompt=True))
        ours = tok.decode(last_prompt)
        assert ours != fresh
        think = renderer.dialect
        assert drop_think_blocks(ours, think) == drop_think_blocks(fresh, think)
    else:
        assert renderer.extension is ExtensionMode.SEGMENTS
    trajectory = Trajectory(
        turns=tuple(turns),
        stop_reason="won",
        won=True,
        group_id="g",
        task=TaskInfo("t"),  # type: ignore[arg-type]
    )
    datums = trajectory_to_datums(trajectory, [1.0] * len(turns))
    assert len(datums) == (len(turns) if renderer.segments else 1)
    trained = [int(t) for d in datums for t in d.target_tokens[d.mask == 1.0]]
    assert trained == [t for turn in turns for t in turn.completion_tokens]
    logprobs = np.concatenate([d.logprobs[d.mask == 1.0] for d in datums])
    assert np.allclose(logprobs, -0.5)


EXTENSION = {
    "qwen3.5-4b": ExtensionMode.EXTENDS,
    "qwen3-0.6b": ExtensionMode.SAFE_REWRITE,
    "qwen3-coder": ExtensionMode.EXTENDS,
    "qwen2.5-7b-instruct": ExtensionMode.EXTENDS,
    "llama-3.1-8b-instruct": ExtensionMode.EXTENDS,
    "gpt-oss-120b": ExtensionMode.SEGMENTS,
}


@pytest.mark.parametrize("path", [p for p in TEMPLATES if p.stem in EXTENSION], ids=str)
def test_extension_modes_are_as_documented(path: Path, family_tokenizers: dict[str, Any]) -> None:
    tok = family_tokenizers[path.stem]
    renderer = ChatRenderer(tok, PROTOCOL.tools, chat_template=path.read_text(encoding="utf-8"))
    assert renderer.extension is EXTENSION[path.stem]


CONTENTS = (
    "  leading and trailing whitespace  \n",
    "quotes \"x\" and 'y' & <b>markup</b>",
    "a back\\slash\tand a tab",
    "naïve café, 中文, emoji \U0001f600",
    '{"json": [1, 2], "nested": {"k": "v"}}',
    "several\nlines\n\nand a blank one",
    "",
    "   ",
    "plain again",
)
"""Tool results a template might trim, escape or branch on (the empty ones are rendered)."""


class CountingRenders:
    """The real tokenizer, counting template renders."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.renders = 0

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        self.renders += 1
        return self.inner.apply_chat_template(conversation, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize(("path", "dialect", "thinking"), cases())
def test_tool_message_frames_are_exact_and_render_nothing(
    path: Path, dialect: str | None, thinking: bool, family_tokenizers: dict[str, Any]
) -> None:
    """Every extendable template's tool messages after the first come from the learned frame
    (no template render), token for token what a full render per turn gives."""
    tok = family_tokenizers[path.stem]
    template = path.read_text(encoding="utf-8")
    counting = CountingRenders(tok)
    framed = ChatRenderer(
        counting, PROTOCOL.tools, chat_template=template, enable_thinking=thinking
    )  # type: ignore[arg-type]
    if framed.segments:
        pytest.skip(f"{path.stem} cannot be extended (segments)")
    reference = ChatRenderer(
        tok, PROTOCOL.tools, chat_template=template, enable_thinking=thinking, verify="full"
    )
    messages = [
        Message(role="system", content=PROTOCOL.system_prompt),
        Message(role="user", content="Step 0 of 9.\nObservation:\nYou are in a room."),
    ]
    ours = framed.initial_prompt(messages, PROTOCOL.tools)
    theirs = reference.initial_prompt(messages, PROTOCOL.tools)
    dialect = framed.dialect
    reply = dialect.write(ToolCall(TOOL, {PROTOCOL.parameter: "look"}))
    if thinking:
        opened = dialect.think is not None and tok.decode(ours).rstrip().endswith(dialect.think[0])
        reply = dialect.reasoning_reply("Look first.", reply, opened=opened)
    completion = [*framed.encode(reply), tok.convert_tokens_to_ids(dialect.stop_markers[0])]
    renders = []
    for content in ("first result", *CONTENTS):
        tool = Message(role="tool", name=TOOL, content=content)
        before = counting.renders
        ours = framed.extend(ours, completion, tool)
        theirs = reference.extend(theirs, completion, tool)
        assert ours == theirs, (path.stem, content)
        renders.append(counting.renders - before)
    framed_turns = [n for n, c in zip(renders[1:], CONTENTS, strict=True) if c.strip()]
    assert framed_turns == [0] * len(framed_turns), (path.stem, renders)
    assert renders[0] == 3  # the real render and two marker renders
    if framed.extension is ExtensionMode.EXTENDS:
        whole = [*messages]
        for content in ("first result", *CONTENTS):
            whole += [
                Message(role="assistant", content=framed.completion_text(completion)),
                Message(role="tool", name=TOOL, content=content),
            ]
        assert ours == framed.render(whole, add_generation_prompt=True)
