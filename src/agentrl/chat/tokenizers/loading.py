"""Real tokenizers: a model's own from a path or the Hugging Face cache (`load_tokenizer`), and
a family's control tokens added to a test tokenizer (`add_template_tokens`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl._optional import require

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["add_template_tokens", "load_tokenizer"]

_CONTROL = re.compile(r"<\|[A-Za-z0-9_]+\|>|<｜[^｜\s]+｜>|\[gMASK\]|<sop>")
_TAG = re.compile(r"</?[a-z_]+>")
_BOS = ("<|begin_of_text|>", "<｜begin▁of▁sentence｜>")


def add_template_tokens(
    tokenizer: PreTrainedTokenizerBase, template: str, markers: Iterable[str] = ()
) -> list[str]:
    """Add a chat template's control tokens to a test tokenizer, so each is one token.

    The real tokenizers of non-Qwen families are not available offline; the Qwen tokenizer plus
    a family's control tokens (`<|eot_id|>`, `<|channel|>`, `<｜tool▁sep｜>`, `[gMASK]` ...,
    found in the template, plus `markers` that look like tags or control tokens, e.g. a
    dialect's) tokenizes that family's prompts with the right token boundaries. The template's
    BOS token (Llama, DeepSeek) becomes `bos_token`. Returns the tokens added.
    """
    found = dict.fromkeys(_CONTROL.findall(template))
    for marker in markers:
        if _CONTROL.fullmatch(marker) or _TAG.fullmatch(marker):
            found[marker] = None
    vocab = tokenizer.get_vocab()
    new = [token for token in found if token not in vocab]
    if new:
        tokenizer.add_tokens(new, special_tokens=True)
    bos = next((t for t in _BOS if t in found), None)
    if bos is not None:
        tokenizer.bos_token = bos
    return new


def load_tokenizer(source: str | Path, **kwargs: Any) -> PreTrainedTokenizerBase:
    """A model's own tokenizer from a local directory or the Hugging Face cache.

    `kwargs` go to `AutoTokenizer.from_pretrained` (e.g. `local_files_only=True` offline).
    """
    transformers = require("transformers", "local", "loading a tokenizer")
    try:
        tokenizer: PreTrainedTokenizerBase = transformers.AutoTokenizer.from_pretrained(
            str(source), **kwargs
        )
    except (OSError, ValueError) as exc:
        raise OSError(
            f"could not load a tokenizer from {str(source)!r}: {exc}. Pass a local directory "
            "that holds tokenizer.json / tokenizer_config.json, or a model name already in "
            "the Hugging Face cache (set HF_HUB_OFFLINE=1 on machines without internet)."
        ) from exc
    if tokenizer.chat_template is None:
        raise ValueError(
            f"the tokenizer from {str(source)!r} has no chat template; agentrl renders "
            "prompts with the model's own template (set tokenizer.chat_template to one)"
        )
    return tokenizer
