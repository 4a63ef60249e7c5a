"""Cheap, still exact, encoding of the text a turn adds: boundary checks and a line cache.

`ChatRenderer.tool_message_tokens` encodes only the new text after a closed assistant turn.
Whether that delta may be encoded on its own (its first tokens do not merge with the closing
text before it) is checked by `BoundaryCheck`:

- when the delta starts with an atomic special token (an added token the tokenizer splits off
  before anything else, without stripping the whitespace to its left), nothing on its left can
  change its tokens: checked ONCE per leading token, by encoding the closing text followed by
  that token;
- otherwise only the boundary is encoded: `encode(closing + delta) == closing + delta tokens`
  (cost: the new text, never the history).

`VerifyMode.FULL` keeps the old check (the probe conversation re-encoded every turn).

`LineEncoder` encodes text line by line with a bounded cache of line tokens (admissible-action
lists repeat across turns and branches). Splitting is only allowed at a newline followed by a
character that is not whitespace, which is a pre-tokenizer boundary of byte-level BPE
tokenizers (GPT-2 / Qwen / Llama-3 patterns); the encoder tests that on tricky probe texts when
it is built and stays off for a tokenizer that fails (e.g. SentencePiece's leading `▁`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

__all__ = [
    "BoundaryCheck",
    "LineEncoder",
    "VerifyMode",
    "batch_encoder",
    "missing_suffix",
    "verify_mode",
]

Encode = Callable[[str], list[int]]
EncodeMany = Callable[[list[str]], list[list[int]]]


class VerifyMode(StrEnum):
    """How the renderer checks that a delta's tokens equal a full render's."""

    FULL = "full"
    """Re-encode the whole probe conversation every turn (O(probe), the reference check)."""
    BOUNDARY = "boundary"
    """Check only where a merge is possible (once per leading special token, else the
    boundary); the default."""
    OFF = "off"
    """No check (the template was checked when the renderer was built)."""


def verify_mode(value: bool | str | VerifyMode) -> VerifyMode:
    """`True` -> boundary, `False` -> off, a name -> that mode."""
    if isinstance(value, bool):
        return VerifyMode.BOUNDARY if value else VerifyMode.OFF
    return VerifyMode(value)


class BoundaryCheck:
    """Decides whether a delta after `closing_text` may be encoded on its own."""

    def __init__(
        self, tokenizer: Any, encode: Encode, closing_text: str, closing_tokens: Sequence[int]
    ) -> None:
        self._encode = encode
        self._closing_text = closing_text
        self._closing = list(closing_tokens)
        decoder = getattr(tokenizer, "added_tokens_decoder", None)
        self._added: dict[int, Any] = dict(decoder) if isinstance(decoder, dict) else {}
        self._atomic: dict[int, bool] = {}
        self.boundary_encodes = 0
        """How many deltas needed a boundary encode (no atomic leading token)."""

    def _atomic_lead(self, first: int, text: str) -> bool:
        known = self._atomic.get(first)
        if known is not None:
            return known
        added = self._added.get(first)
        content = getattr(added, "content", None)
        atomic = (
            isinstance(content, str)
            and bool(content)
            and text.startswith(content)
            and getattr(added, "lstrip", False) is False
            and self._encode(self._closing_text + content) == [*self._closing, first]
            and self._encode(content) == [first]
        )
        self._atomic[first] = atomic
        return atomic

    def ok(self, text: str, tokens: Sequence[int]) -> bool:
        """True when `closing_text + text` encodes to the closing tokens followed by `tokens`."""
        if not tokens:
            return not text
        if self._atomic_lead(tokens[0], text):
            return True
        self.boundary_encodes += 1
        return self._encode(self._closing_text + text) == [*self._closing, *tokens]


_SPLIT = re.compile(r"(?<=\n)(?=\S)")
"""Positions right after a newline and before a non-whitespace character."""

_PROBES = (
    "Observation:\nYou arrive at desk 1. On the desk 1, you see a pen 1.\nAvailable actions:\n"
    "- go to bed 1\n- take pen 1 from desk 1\n- look\n",
    "a.\nb\n\n  c\n\t d\r\ne 12\n3 x\n\u00e9t\u00e9\n\u4f60\u597d\n'll\n's x\n!!\n?\n",
    '\n\nx\n \ny\n.\n,z\n<x>\n</tool_response>\n{"a": 1}\n',
    "line one\nline two\nline one\nline two\n",
)


class LineEncoder:
    """`encode(text)` as the tokenizer would, reusing cached tokens of repeated lines.

    `enabled` is False when asked, or when the tokenizer's tokens change at a line split (then
    every call is one plain encode). The cache holds at most `max_lines` lines (cleared when full).
    """

    def __init__(
        self,
        encode: Encode,
        *,
        encode_many: EncodeMany | None = None,
        enabled: bool = True,
        max_lines: int = 8192,
        max_line_chars: int = 400,
    ) -> None:
        self._encode = encode
        self._encode_many = encode_many
        self._cache: dict[str, list[int]] = {}
        self.max_lines = max_lines
        self.max_line_chars = max_line_chars
        self.enabled = enabled and all(
            self._split_encode(p, cache=False) == encode(p) for p in _PROBES
        )

    def _split_encode(self, text: str, *, cache: bool = True) -> list[int]:
        pieces = [p for p in _SPLIT.split(text) if p]
        known: dict[str, list[int]] = self._cache if cache else {}
        misses = list(dict.fromkeys(p for p in pieces if p not in known))
        fresh: dict[str, list[int]] = {}
        if misses:  # one tokenizer call for all new lines (its per-call overhead dominates)
            if self._encode_many is not None and len(misses) > 1:
                encoded = self._encode_many(misses)
            else:
                encoded = [self._encode(p) for p in misses]
            fresh = dict(zip(misses, encoded, strict=True))
        out: list[int] = []
        for piece in pieces:
            tokens = fresh.get(piece)
            out.extend(tokens if tokens is not None else known[piece])
        if cache and fresh:
            if len(self._cache) + len(fresh) > self.max_lines:
                self._cache.clear()
            self._cache.update((p, t) for p, t in fresh.items() if len(p) <= self.max_line_chars)
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, equal to one plain encode of it."""
        if not self.enabled:
            return self._encode(text)
        return self._split_encode(text)


def missing_suffix(completion: Sequence[int], after: Sequence[int]) -> list[int]:
    """`after` without the prefix of it that the completion already ends with."""
    for k in range(min(len(after), len(completion)), 0, -1):
        if list(completion[-k:]) == list(after[:k]):
            return list(after[k:])
    return list(after)


def batch_encoder(tokenizer: Any) -> EncodeMany | None:
    """A batch encode through the tokenizer's `__call__` (Hugging Face), when it has one."""
    if not callable(tokenizer):
        return None

    def many(texts: list[str]) -> list[list[int]]:
        return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    return many
