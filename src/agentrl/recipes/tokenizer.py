"""The learning recipes' tokenizers: small byte-level BPEs of the project's own, trained
offline on rendered conversations (`bpe_tokenizer`): any learning env's (`env_tokenizer`, the
random valid policy's play rendered with Qwen's template), the fetch task's (`fetch_tokenizer`,
`agentrl.recipes.learning`) and ALFWorld's (`benchmarks/alfworld_from_scratch.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.recipes.fetch import LearningSetup, fetch_learning_env
from agentrl.recipes.learning_env import LearningEnv, play, random_valid_policy

__all__ = ["bpe_tokenizer", "env_tokenizer", "fetch_tokenizer"]


def _corpus(env: LearningEnv) -> list[str]:
    """Rendered conversations of random valid play (Qwen's template), the tokenizer's corpus."""
    import asyncio

    from agentrl.chat.tokenizers import build_qwen_tokenizer
    from agentrl.core.seeds import derive_seed
    from agentrl.testing import KeyedPolicySampler

    qwen: Any = build_qwen_tokenizer()
    sampler = KeyedPolicySampler(qwen, random_valid_policy(env.protocol))

    async def games() -> list[Any]:
        return await play(sampler, qwen, env, env.tokenizer_tasks, 1, derive_seed(1, "corpus"))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        groups = asyncio.run(games())
    else:  # called from async code (a notebook, an async test): play on a thread of its own
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            groups = pool.submit(asyncio.run, games()).result()
    texts = []
    for group in groups:
        for trajectory in group.trajectories:
            last = trajectory.turns[-1]
            texts.append(qwen.decode([*last.prompt_tokens, *last.completion_tokens]))
            if last.tool_message is not None:
                texts.append(last.tool_message.content)
    return texts


def env_tokenizer(env: LearningEnv, vocab_size: int = 600) -> Any:
    """A small byte-level BPE tokenizer of the project's own, trained offline (in about a
    second) on the env's own conversations (the random valid policy's play of its
    `tokenizer_tasks`, rendered with Qwen's template), with Qwen's pre-tokenizer, added tokens
    and the project's Qwen3-style chat template: any text encodes, and the vocabulary is ~250x
    smaller than Qwen's, which is what makes a from-scratch model cheap on a CPU.
    Deterministic."""
    return bpe_tokenizer(_corpus(env), vocab_size)


def fetch_tokenizer(setup: LearningSetup | None = None, vocab_size: int = 600) -> Any:
    """`env_tokenizer` of the fetch env of `setup` (96 games of their own seed range)."""
    return env_tokenizer(fetch_learning_env(setup or LearningSetup()), vocab_size)


def bpe_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on `texts` (at most `vocab_size` tokens; with no
    texts, the 256 byte tokens and the added ones), with Qwen's pre-tokenizer, added tokens
    and the project's Qwen3-style chat template, as a `transformers` fast tokenizer."""
    from agentrl._optional import require
    from agentrl.chat.tokenizers import (
        QWEN_SPECIAL_TOKENS,
        as_qwen_fast_tokenizer,
        qwen_style_tokenizer,
    )

    tokenizers = require("tokenizers", "local", "a project tokenizer")
    tok = qwen_style_tokenizer(tokenizers.models.BPE())
    special = [t.content for t in QWEN_SPECIAL_TOKENS]
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return as_qwen_fast_tokenizer(tok, model_max_length=32_768)
