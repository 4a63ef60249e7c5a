"""Tokenizers: load a real one from a local path, or build Qwen's from dashscope's vocabulary.

No model can be downloaded in some environments (CI, air-gapped machines), yet tests and the
CPU demo want realistic token counts. The `dashscope` package ships Qwen's byte-level BPE
vocabulary (`dashscope/resources/qwen.tiktoken`, 151,643 ranks, the vocabulary of Qwen2,
Qwen2.5 and Qwen3). `build_qwen_tokenizer` turns it into a `transformers` fast tokenizer with
Qwen's pre-tokenizer, its added tokens at their real ids (`<|endoftext|>` 151643 ...
`</think>` 151668) and a Qwen3-style ChatML + tools chat template written for this project
(`QWEN_CHAT_TEMPLATE`). The result is cached on disk, so it is built once per machine.

Real model tokenizers come from `agentrl.chat.tokenizers.load_tokenizer(path_or_name)`.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl._optional import MissingExtraError, require

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "QWEN_CHAT_TEMPLATE",
    "QWEN_PRETOKENIZE_PATTERN",
    "QWEN_SPECIAL_TOKENS",
    "QwenAddedToken",
    "build_qwen_tokenizer",
    "default_cache_dir",
    "qwen_tiktoken_path",
]

QWEN_PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen's pre-tokenizer split pattern (single digits, GPT-4-like word and space rules)."""

NUM_QWEN_RANKS = 151_643
"""Number of BPE ranks in Qwen's vocabulary (ids 0..151642)."""


@dataclass(frozen=True)
class QwenAddedToken:
    """One of Qwen's added tokens: its id, text, and whether `skip_special_tokens` drops it."""

    id: int
    content: str
    special: bool


_SPECIAL_NAMES = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

QWEN_SPECIAL_TOKENS: tuple[QwenAddedToken, ...] = tuple(
    QwenAddedToken(id=NUM_QWEN_RANKS + i, content=name, special=special)
    for i, (name, special) in enumerate(_SPECIAL_NAMES)
)
"""Qwen3's added tokens at their real ids (151643-151668), as in Qwen3's tokenizer config.
Tool-call and think markers are not "special": decoding with `skip_special_tokens` keeps them."""

QWEN_CHAT_TEMPLATE = """\
{%- set think_off = enable_thinking is defined and enable_thinking is false -%}
{%- macro render_value(value) -%}
{%- if value is string -%}{{ value }}{%- else -%}{{ value | tojson }}{%- endif -%}
{%- endmacro -%}
{%- if tools -%}
{{- '<|im_start|>system\\n' -}}
{%- if messages and messages[0].role == 'system' -%}\
{{- messages[0].content + '\\n\\n' -}}{%- endif -%}
{{- '# Tools\\n\\nYou can call the following functions. Their JSON schemas are listed \
inside <tools></tools>:\\n<tools>' -}}
{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\\n</tools>\\n\\nTo call a function, reply with exactly this form and nothing after it:\
\\n<tool_call>\\n<function=FUNCTION_NAME>\\n<parameter=PARAMETER_NAME>\\nVALUE\\n</parameter>\
\\n</function>\\n</tool_call><|im_end|>\\n' -}}
{%- elif messages and messages[0].role == 'system' -%}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- set content = message.content if message.content is string else '' -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'user' or message.role == 'system' -%}
{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' -}}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if message.reasoning_content is string -%}
{{- '<think>\\n' + message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' -}}
{%- elif think_off -%}
{{- '<think>\\n\\n</think>\\n\\n' -}}
{%- endif -%}
{{- content -}}
{%- for call in message.tool_calls or [] -%}
{%- set call = call.function if call.function is defined else call -%}
{%- if content or not loop.first -%}{{- '\\n' -}}{%- endif -%}
{{- '<tool_call>\\n<function=' + call.name + '>\\n' -}}
{%- if call.arguments is mapping -%}
{%- for key, value in call.arguments.items() -%}
{{- '<parameter=' + key + '>\\n' + render_value(value) + '\\n</parameter>\\n' -}}
{%- endfor -%}
{%- else -%}{{- render_value(call.arguments) + '\\n' -}}
{%- endif -%}
{{- '</function>\\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}\
{%- endif -%}
{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' -}}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\\n' -}}\
{%- endif -%}
{%- else -%}
{{- raise_exception('unsupported message role: ' + message.role) -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if think_off -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}
{%- endif -%}
"""
"""A Qwen3-style ChatML + tools template written for agentrl.

Tools are listed as JSON in the system turn; assistant tool calls are rendered as Qwen3.5-style
XML (`<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n
</tool_call>`); tool results are `<tool_response>` blocks inside a user turn. With
`enable_thinking=False` the generation prompt ends with an empty think block, like Qwen3. Unlike
Qwen3's own template it never rewrites history: an earlier assistant turn is rendered exactly as
it was generated (with `enable_thinking=False`, with its empty think block), so every turn's
prompt is a token prefix of the next one."""

_BUILD_VERSION = "1"
"""Bump when the builder changes so cached tokenizers are rebuilt."""


def qwen_tiktoken_path() -> Path:
    """Where dashscope's `qwen.tiktoken` lives (without importing dashscope)."""
    spec = importlib.util.find_spec("dashscope")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            "Python package 'dashscope' is not installed (it ships Qwen's BPE vocabulary). "
            "Install it with: pip install 'agentrl[local]'"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "resources" / "qwen.tiktoken"
        if path.is_file():
            return path
    raise FileNotFoundError(
        "the installed dashscope package has no resources/qwen.tiktoken "
        f"(looked in {list(spec.submodule_search_locations)}); reinstall it with "
        "pip install --force-reinstall 'dashscope>=1.20'"
    )


def default_cache_dir() -> Path:
    """`$AGENTRL_CACHE_DIR`, else `$XDG_CACHE_HOME/agentrl`, else `~/.cache/agentrl`."""
    explicit = os.environ.get("AGENTRL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "agentrl"


def _byte_to_unicode() -> dict[int, str]:
    """The byte-level BPE alphabet: printable bytes map to themselves, the rest above 255."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def _read_ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected '<base64 token> <rank>', got {line!r}")
        ranks[base64.b64decode(parts[0])] = int(parts[1])
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError(f"{path}: ranks are not the contiguous range 0..{len(ranks) - 1}")
    return ranks


def _merges(ranks: dict[bytes, int]) -> Iterable[tuple[bytes, bytes]]:
    """BPE merges equivalent to tiktoken's rank order: every split of every multi-byte token
    into two tokens, ordered by the merged token's rank (ties by the parts' ranks)."""
    found: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            left_rank = ranks.get(left)
            right_rank = ranks.get(right)
            if left_rank is not None and right_rank is not None:
                found.append((rank, left_rank, right_rank, left, right))
    found.sort()
    return ((left, right) for _, _, _, left, right in found)


def _build(tiktoken_file: Path) -> PreTrainedTokenizerFast:
    tokenizers = require("tokenizers", "local", "building the Qwen tokenizer")
    ranks = _read_ranks(tiktoken_file)
    if len(ranks) != NUM_QWEN_RANKS:
        raise ValueError(f"{tiktoken_file}: expected {NUM_QWEN_RANKS} ranks, got {len(ranks)}")
    alphabet = _byte_to_unicode()

    def encode(raw: bytes) -> str:
        return "".join(alphabet[b] for b in raw)

    vocab = {encode(token): rank for token, rank in ranks.items()}
    merges = [(encode(left), encode(right)) for left, right in _merges(ranks)]
    model = tokenizers.models.BPE(vocab=vocab, merges=merges, ignore_merges=False)
    tok = qwen_style_tokenizer(model)
    for added in QWEN_SPECIAL_TOKENS:
        token = tokenizers.AddedToken(added.content, special=added.special, normalized=False)
        if added.special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
        actual = tok.token_to_id(added.content)
        if actual != added.id:
            raise RuntimeError(f"{added.content} got id {actual}, expected {added.id}")
    return as_qwen_fast_tokenizer(tok, model_max_length=262_144)


def qwen_style_tokenizer(model: Any) -> Any:
    """A `tokenizers.Tokenizer` over a BPE `model` with Qwen's pipeline: NFC, Qwen's
    pre-tokenizer split, byte-level pre-tokenizer / decoder / post-processor."""
    tokenizers = require("tokenizers", "local", "a Qwen-style tokenizer")
    tok = tokenizers.Tokenizer(model)
    tok.normalizer = tokenizers.normalizers.NFC()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [
            tokenizers.pre_tokenizers.Split(
                tokenizers.Regex(QWEN_PRETOKENIZE_PATTERN), behavior="isolated", invert=False
            ),
            tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.post_processor = tokenizers.processors.ByteLevel(trim_offsets=False)
    return tok


def as_qwen_fast_tokenizer(tok: Any, *, model_max_length: int) -> PreTrainedTokenizerFast:
    """`tok` as a `transformers` fast tokenizer with Qwen's end / pad / special tokens and the
    project's Qwen3-style chat template."""
    transformers = require("transformers", "local", "a Qwen-style tokenizer")
    built: PreTrainedTokenizerFast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[t.content for t in QWEN_SPECIAL_TOKENS[1:] if t.special],
        chat_template=QWEN_CHAT_TEMPLATE,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    return built


def _cache_key(tiktoken_file: Path) -> str:
    digest = hashlib.sha256()
    digest.update(tiktoken_file.read_bytes())
    digest.update(_BUILD_VERSION.encode())
    digest.update(QWEN_CHAT_TEMPLATE.encode())
    return digest.hexdigest()[:16]


def build_qwen_tokenizer(cache_dir: Path | None = None) -> PreTrainedTokenizerFast:
    """Qwen's tokenizer (Qwen2/2.5/3 vocabulary) with agentrl's Qwen3-style chat template.

    Built from dashscope's `qwen.tiktoken` on first use (a few seconds) and cached under
    `cache_dir` (default: `default_cache_dir()`), keyed by the vocabulary file and this builder.
    """
    transformers = require("transformers", "local", "the Qwen tokenizer")
    source = qwen_tiktoken_path()
    root = (cache_dir if cache_dir is not None else default_cache_dir()) / "tokenizers"
    target = root / f"qwen-{_cache_key(source)}"
    if (target / "tokenizer.json").is_file():
        loaded: PreTrainedTokenizerFast = transformers.PreTrainedTokenizerFast.from_pretrained(
            str(target)
        )
        return loaded
    tokenizer = _build(source)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".qwen-", dir=root))
    try:
        tokenizer.save_pretrained(str(staging))
        try:
            staging.rename(target)
        except OSError:
            if not (target / "tokenizer.json").is_file():  # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return tokenizer
