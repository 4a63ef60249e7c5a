"""The Qwen tokenizer built from dashscope's vocabulary: ids, tiktoken equivalence, template."""

from __future__ import annotations

import base64
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.tokenizer import (
    QWEN_PRETOKENIZE_PATTERN,
    QWEN_SPECIAL_TOKENS,
    build_qwen_tokenizer,
    qwen_tiktoken_path,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "alfworld_step",
            "description": "Run one command.",
            "parameters": {
                "type": "object",
                "properties": {"action": {"type": "string"}},
                "required": ["action"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def tiktoken_encoding() -> Any:
    """tiktoken's own BPE over the same ranks and pattern: the reference encoder."""
    tiktoken = pytest.importorskip("tiktoken")
    lines = qwen_tiktoken_path().read_bytes().splitlines()
    ranks = {base64.b64decode(a): int(b) for a, b in (line.split() for line in lines if line)}
    return tiktoken.Encoding(
        "qwen-reference", pat_str=QWEN_PRETOKENIZE_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )


def test_vocabulary_size_and_real_special_ids(qwen_tokenizer: Any) -> None:
    assert len(qwen_tokenizer) == 151_669
    ids = qwen_tokenizer.convert_tokens_to_ids
    assert ids("<|endoftext|>") == 151643
    assert ids("<|im_start|>") == 151644
    assert ids("<|im_end|>") == 151645
    assert ids("<tool_call>") == 151657
    assert ids("</tool_call>") == 151658
    assert ids("<tool_response>") == 151665
    assert ids("</tool_response>") == 151666
    assert ids("<think>") == 151667
    assert ids("</think>") == 151668
    assert qwen_tokenizer.eos_token_id == 151645
    assert qwen_tokenizer.pad_token_id == 151643
    assert [t.id for t in QWEN_SPECIAL_TOKENS] == list(range(151643, 151669))


def test_markup_tokens_survive_skip_special_tokens(qwen_tokenizer: Any) -> None:
    text = "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>x</tool_call><|im_end|>"
    ids = qwen_tokenizer.encode(text, add_special_tokens=False)
    assert 151657 in ids and 151645 in ids
    decoded = qwen_tokenizer.decode(ids, skip_special_tokens=True)
    assert decoded == "assistant\n<think>\n\n</think>\n\n<tool_call>x</tool_call>"
    assert qwen_tokenizer.decode(ids) == text


CORPUS = [
    "Hello world, 12345 go to countertop 1.\n\nYou arrive at fridge 1.",
    "def f(x):\n    return x ** 2  # squares\n\n\n",
    "It's a test; we'll see   what   they've DONE's\r\n\tindeed.",
    "中文字符 日本語 한국어 🙂🚀 naïve café",
    "   leading and trailing spaces   ",
    '{"name": "alfworld_step", "arguments": {"action": "take apple 1 from table 2"}}',
]


@pytest.mark.parametrize("text", CORPUS)
def test_matches_tiktoken_on_corpus(qwen_tokenizer: Any, tiktoken_encoding: Any, text: str) -> None:
    assert qwen_tokenizer.encode(text, add_special_tokens=False) == (
        tiktoken_encoding.encode_ordinary(text)
    )


@settings(max_examples=400, deadline=None)
@given(text=st.text(max_size=60))
def test_matches_tiktoken_on_random_text(
    qwen_tokenizer: Any, tiktoken_encoding: Any, text: str
) -> None:
    text = unicodedata.normalize("NFC", text)  # Qwen normalises to NFC, tiktoken does not
    if any(t.content in text for t in QWEN_SPECIAL_TOKENS):
        return
    ids = qwen_tokenizer.encode(text, add_special_tokens=False)
    assert ids == tiktoken_encoding.encode_ordinary(text)
    assert qwen_tokenizer.decode(ids) == text


def test_realistic_token_count(qwen_tokenizer: Any) -> None:
    text = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1."
    # Qwen spends roughly one token per English word; a character-level fake would not.
    assert 18 <= len(qwen_tokenizer.encode(text, add_special_tokens=False)) <= 24


def render(tok: Any, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    out: str = tok.apply_chat_template(messages, tokenize=False, **kwargs)
    return out


def test_template_tools_system_and_generation_prompt(qwen_tokenizer: Any) -> None:
    text = render(
        qwen_tokenizer,
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tools=TOOLS,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert "\n<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n</tools>" in text
    assert text.endswith(
        "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    thinking = render(
        qwen_tokenizer, [{"role": "user", "content": "Hi"}], add_generation_prompt=True
    )
    assert thinking == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_template_tool_calls_as_xml_and_tool_responses(qwen_tokenizer: Any) -> None:
    call = {
        "type": "function",
        "function": {"name": "alfworld_step", "arguments": {"action": "look"}},
    }
    messages = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "alfworld_step", "content": "You see a desk 1."},
        {"role": "tool", "name": "alfworld_step", "content": "Second."},
        {"role": "assistant", "content": "Done.", "tool_calls": [call]},
    ]
    text = render(qwen_tokenizer, messages, enable_thinking=False)
    assert text == (
        "<|im_start|>user\nGo<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        "<tool_call>\n<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>\n"
        "</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nYou see a desk 1.\n</tool_response>\n"
        "<tool_response>\nSecond.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nDone.\n"
        "<tool_call>\n<function=alfworld_step>\n<parameter=action>\nlook\n</parameter>\n"
        "</function>\n</tool_call><|im_end|>\n"
    )


def test_template_never_rewrites_history(qwen_tokenizer: Any) -> None:
    """Each generation prompt plus the assistant's text is a prefix of the next render."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "S"}]
    previous = ""
    for turn in range(3):
        messages.append({"role": "user" if turn == 0 else "tool", "content": f"obs {turn}"})
        prompt = render(
            qwen_tokenizer, messages, tools=TOOLS, add_generation_prompt=True, enable_thinking=False
        )
        assert prompt.startswith(previous)
        reply = (
            "<tool_call>\n<function=alfworld_step>\n<parameter=action>\n"
            f"go {turn}\n</parameter>\n</function>\n</tool_call>"
        )
        messages.append({"role": "assistant", "content": reply})
        full = render(qwen_tokenizer, messages, tools=TOOLS, enable_thinking=False)
        assert full == prompt + reply + "<|im_end|>\n"
        previous = full


@pytest.mark.slow
def test_cache_is_built_once(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    first = build_qwen_tokenizer(tmp_path)
    built = list((tmp_path / "tokenizers").iterdir())
    assert len(built) == 1 and (built[0] / "tokenizer.json").is_file()
    mtime = (built[0] / "tokenizer.json").stat().st_mtime_ns
    second = build_qwen_tokenizer(tmp_path)
    assert (built[0] / "tokenizer.json").stat().st_mtime_ns == mtime
    sample = "take apple 1 from countertop 2"
    assert first.encode(sample) == second.encode(sample)
    assert second.chat_template == first.chat_template
