"""Shared fixtures: a real Qwen tokenizer built from dashscope's vocabulary (cached on disk)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def qwen_tokenizer() -> Any:
    """Qwen's real BPE tokenizer with agentrl's Qwen3-style chat template (built once, cached)."""
    pytest.importorskip("transformers")
    pytest.importorskip("dashscope")
    from agentrl.tokenizer import build_qwen_tokenizer

    return build_qwen_tokenizer()
