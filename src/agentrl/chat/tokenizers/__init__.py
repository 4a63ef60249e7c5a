"""Tokenizers: a model's own (`load_tokenizer`), or Qwen's built offline from dashscope's
vocabulary (`build_qwen_tokenizer`, see `agentrl.chat.tokenizers.qwen`).

`transformers` / `tokenizers` are imported only when a tokenizer is built or loaded.
"""

from agentrl.chat.tokenizers.compat import (
    TokenizerMismatchError,
    check_same_tokenizer,
    tokenizer_name,
)
from agentrl.chat.tokenizers.loading import add_template_tokens, load_tokenizer
from agentrl.chat.tokenizers.qwen import (
    NUM_QWEN_RANKS,
    QWEN_CHAT_TEMPLATE,
    QWEN_PRETOKENIZE_PATTERN,
    QWEN_SPECIAL_TOKENS,
    QwenAddedToken,
    as_qwen_fast_tokenizer,
    build_qwen_tokenizer,
    default_cache_dir,
    qwen_style_tokenizer,
    qwen_tiktoken_path,
)

__all__ = [
    "NUM_QWEN_RANKS",
    "QWEN_CHAT_TEMPLATE",
    "QWEN_PRETOKENIZE_PATTERN",
    "QWEN_SPECIAL_TOKENS",
    "QwenAddedToken",
    "TokenizerMismatchError",
    "add_template_tokens",
    "as_qwen_fast_tokenizer",
    "build_qwen_tokenizer",
    "check_same_tokenizer",
    "default_cache_dir",
    "load_tokenizer",
    "qwen_style_tokenizer",
    "qwen_tiktoken_path",
    "tokenizer_name",
]
