"""ChatRenderer on the real Qwen tokenizer: exact prefix extension, template checks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.chat import ChatRenderer, ChatTemplateError, HistoryRewriteError
from agentrl.chat.history import ExtensionMode
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.types import Message

PROTOCOL = alfworld_tool_protocol()
IM_END, NEWLINE, ENDOFTEXT = 151645, 198, 151643

# Like Qwen3's own template: the empty think block is kept only on the last assistant turn.
REWRITING_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if loop.last -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{{- m.content + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + m.content -}}"
    "{{- '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
)


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer, PROTOCOL.tools)


def first_messages() -> list[Message]:
    return [
        Message(role="system", content=PROTOCOL.system_prompt),
        Message(role="user", content="Step 0 of 50.\nObservation:\nYou are in a room."),
    ]


def test_closing_and_stop_tokens(renderer: ChatRenderer) -> None:
    assert renderer.closing_text == "<|im_end|>\n"
    assert renderer.closing_tokens == [IM_END, NEWLINE]
    assert renderer.stop_tokens == (IM_END, ENDOFTEXT)
    assert renderer.missing_closing([1, 2, IM_END]) == [NEWLINE]
    assert renderer.missing_closing([1, 2, 3]) == [IM_END, NEWLINE]
    assert renderer.missing_closing([]) == [IM_END, NEWLINE]


def test_initial_prompt_is_the_template_render(renderer: ChatRenderer, qwen_tokenizer: Any) -> None:
    messages = first_messages()
    tokens = renderer.initial_prompt(messages)
    text = qwen_tokenizer.decode(tokens)
    assert text.startswith("<|im_start|>system\n" + PROTOCOL.system_prompt)
    assert '"name": "alfworld_step"' in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def conversation_check(
    renderer: ChatRenderer, tok: Any, replies: list[str], results: list[str]
) -> None:
    """Extend turn by turn and compare with a full render of the same conversation."""
    messages = first_messages()
    prompt = renderer.initial_prompt(messages)
    for reply, result in zip(replies, results, strict=True):
        completion = [*tok.encode(reply, add_special_tokens=False), IM_END]
        assert renderer.completion_text(completion) == reply
        tool = Message(role="tool", name="alfworld_step", content=result)
        extended = renderer.extend(prompt, completion, tool)
        assert extended[: len(prompt)] == prompt
        assert extended[len(prompt) : len(prompt) + len(completion)] == completion
        messages += [Message(role="assistant", content=reply), tool]
        assert extended == renderer.render(messages, add_generation_prompt=True)
        prompt = extended


def test_extension_equals_full_render_every_turn(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    replies = [PROTOCOL.call_text(a) for a in ("go to desk 1", "take mug 1 from desk 1", "look")]
    replies[1] = "The mug is here.\n" + replies[1]
    results = [
        "Status: executed 'go to desk 1'.\nObservation:\nOn the desk 1, you see a mug 1.",
        "Status: executed.\n\n  trailing spaces and punctuation!?.",
        "中文 observation 🙂 with 123 digits",
    ]
    conversation_check(renderer, qwen_tokenizer, replies, results)


@settings(max_examples=40, deadline=None)
@given(
    replies=st.lists(st.text(max_size=40), min_size=1, max_size=3),
    results=st.lists(st.text(max_size=40), min_size=3, max_size=3),
)
def test_extension_fuzz(
    renderer: ChatRenderer, qwen_tokenizer: Any, replies: list[str], results: list[str]
) -> None:
    import unicodedata

    specials = ("<|", "<tool", "</tool", "<think", "</think", "<function", "<parameter")
    clean = [unicodedata.normalize("NFC", r) for r in replies]
    if any(s in t for t in clean + results for s in specials):
        return
    # A reply must survive decode(encode(.)) to be compared with a text render, and must not
    # merge with the generation prompt's trailing newline (a reply "\n" is sampled as its own
    # token, while a fresh render of "assistant\n\n" merges the two newlines into one token:
    # extension keeps the sampled tokens, so it is right and the text render is not).
    head = qwen_tokenizer.encode("assistant\n")
    clean = [
        r
        for r in clean
        if qwen_tokenizer.decode(qwen_tokenizer.encode(r)) == r
        and qwen_tokenizer.encode("assistant\n" + r) == head + qwen_tokenizer.encode(r)
    ]
    conversation_check(renderer, qwen_tokenizer, clean, results[: len(clean)])


def test_extension_keeps_sampled_tokens_where_a_render_would_merge(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    """A reply starting with a newline: the extension keeps the sampled tokens exactly; a fresh
    render of the same text merges them with the generation prompt's newline."""
    messages = first_messages()
    prompt = renderer.initial_prompt(messages)
    completion = [*qwen_tokenizer.encode("\n"), IM_END]
    tool = Message(role="tool", name="alfworld_step", content="ok")
    extended = renderer.extend(prompt, completion, tool)
    assert extended[len(prompt) : len(prompt) + len(completion)] == completion
    rendered = renderer.render(
        [*messages, Message(role="assistant", content="\n"), tool], add_generation_prompt=True
    )
    assert rendered != extended and len(rendered) == len(extended) - 1


def test_extension_cost_does_not_grow_with_history(qwen_tokenizer: Any) -> None:
    """Template renders during extension see a bounded number of messages, and happen on the
    first tool message only (the real one and two with marker contents, which give the
    template's frame of that message shape); every later turn reuses the frame, exactly."""

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.sizes: list[int] = []

        def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
            self.sizes.append(len(conversation))
            return self.inner.apply_chat_template(conversation, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    counting = Counting(qwen_tokenizer)
    renderer = ChatRenderer(counting, PROTOCOL.tools)
    prompt = renderer.initial_prompt(first_messages())
    counting.sizes.clear()
    completion = [*qwen_tokenizer.encode(PROTOCOL.call_text("look")), IM_END]
    messages = first_messages()
    assistant = Message(role="assistant", content=PROTOCOL.call_text("look"))
    for turn in range(30):
        content = f"observation {turn}" + ('\n  with "quotes" <b> & ws  ' if turn % 2 else "")
        tool = Message(role="tool", name="alfworld_step", content=content)
        prompt = renderer.extend(prompt, completion, tool)
        messages += [assistant, tool]
        if turn == 0:
            assert len(counting.sizes) == 3
    assert len(counting.sizes) == 3 and max(counting.sizes) <= 4
    assert prompt == renderer.render(messages, add_generation_prompt=True)


def test_unterminated_completion_gets_the_full_closing(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    prompt = renderer.initial_prompt(first_messages())
    cut = qwen_tokenizer.encode("<tool_call>\n<function=alfworld_st")
    tool = Message(role="tool", name="alfworld_step", content="x")
    extended = renderer.extend(prompt, cut, tool)
    assert extended[len(prompt) + len(cut) : len(prompt) + len(cut) + 2] == [IM_END, NEWLINE]


def test_dropping_think_blocks_is_a_safe_rewrite(qwen_tokenizer: Any) -> None:
    renderer = ChatRenderer(qwen_tokenizer, chat_template=REWRITING_TEMPLATE, dialect="qwen_xml")
    assert renderer.extension is ExtensionMode.SAFE_REWRITE
    assert renderer.record.rewrite is not None and "think" in renderer.record.rewrite


def test_other_rewrites_are_rejected(qwen_tokenizer: Any) -> None:
    shouting = REWRITING_TEMPLATE.replace("m.content + '<|im_end|>", "m.content + '!<|im_end|>")
    shouting = shouting.replace(
        "{%- if loop.last -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}",
        "{%- if loop.last -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- else -%}"
        "{{- 'Earlier: ' -}}{%- endif -%}",
    )
    with pytest.raises(HistoryRewriteError, match=r"rewrites history.*--allow-history-rewrite"):
        ChatRenderer(qwen_tokenizer, chat_template=shouting, dialect="qwen_xml")


def test_rewriting_template_allowed_keeps_sampled_tokens(qwen_tokenizer: Any) -> None:
    renderer = ChatRenderer(
        qwen_tokenizer,
        chat_template=REWRITING_TEMPLATE,
        allow_history_rewrite=True,
        dialect="qwen_xml",
    )
    prompt = renderer.initial_prompt(first_messages())
    completion = [*qwen_tokenizer.encode(PROTOCOL.call_text("look")), IM_END]
    tool = Message(role="tool", name="alfworld_step", content="You see a desk 1.")
    extended = renderer.extend(prompt, completion, tool)
    delta = extended[len(prompt) + len(completion) :]
    assert qwen_tokenizer.decode(delta) == (
        "\n<|im_start|>user\n<tool_response>\nYou see a desk 1.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_template_whose_closing_merges_with_the_reply_is_rejected(qwen_tokenizer: Any) -> None:
    merging = (
        "{%- for m in messages -%}{{- m.role + ': ' + m.content -}}"
        "{%- if m.role == 'assistant' -%}{{- 'ly|' -}}{%- else -%}{{- '|' -}}{%- endif -%}"
        "{%- endfor -%}{%- if add_generation_prompt -%}{{- 'assistant: ' -}}{%- endif -%}"
    )
    with pytest.raises(ChatTemplateError, match="merges"):
        ChatRenderer(
            qwen_tokenizer, chat_template=merging, probe_reply="move quick", dialect="qwen_xml"
        )
