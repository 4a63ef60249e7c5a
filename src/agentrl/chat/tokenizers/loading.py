"""Real tokenizers: a model's own from a path or the Hugging Face cache (`load_tokenizer`), and
a family's control tokens added to a test tokenizer (`add_template_tokens`)."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

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


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub (`HF_ENDPOINT`, default huggingface.co) accepts a TCP
    connection within `timeout` seconds."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def load_tokenizer(source: str | Path, **kwargs: Any) -> PreTrainedTokenizerBase:
    """A model's own tokenizer from a local directory or the Hugging Face cache.

    `kwargs` go to `AutoTokenizer.from_pretrained` (e.g. `local_files_only=True` offline). A
    name that is neither a folder nor cached is downloaded only when the Hub can be reached;
    otherwise the error says so at once (instead of minutes of retried requests).
    """
    transformers = require("transformers", "local", "loading a tokenizer")
    name = str(source)
    hint = (
        "Pass a local directory that holds tokenizer.json / tokenizer_config.json, or a "
        "model name already in the Hugging Face cache (set HF_HUB_OFFLINE=1 on machines "
        "without internet)."
    )
    online = not Path(name).exists() and not kwargs.get("local_files_only")
    if online:
        try:  # cached: no request at all
            cached: PreTrainedTokenizerBase = transformers.AutoTokenizer.from_pretrained(
                name, **{**kwargs, "local_files_only": True}
            )
            return _checked(cached, name)
        except (OSError, ValueError):
            pass
        if os.environ.get("HF_HUB_OFFLINE") == "1" or not hub_reachable():
            raise OSError(
                f"could not load a tokenizer from {name!r}: it is not a local folder, not in "
                "the Hugging Face cache, and the Hub cannot be reached from this machine. " + hint
            )
    try:
        tokenizer: PreTrainedTokenizerBase = transformers.AutoTokenizer.from_pretrained(
            name, **kwargs
        )
    except (OSError, ValueError) as exc:
        raise OSError(f"could not load a tokenizer from {name!r}: {exc}. {hint}") from exc
    return _checked(tokenizer, name)


def _checked(tokenizer: PreTrainedTokenizerBase, name: str) -> PreTrainedTokenizerBase:
    """`tokenizer`, refused when it has no chat template."""
    if tokenizer.chat_template is None:
        raise ValueError(
            f"the tokenizer from {name!r} has no chat template; agentrl renders "
            "prompts with the model's own template (set tokenizer.chat_template to one)"
        )
    return tokenizer
