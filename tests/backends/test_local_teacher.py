"""The local backend's sampler as an on-policy distillation teacher."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from agentrl.algo.distillation import datum_tokens, distilled_datums, teacher_targets
from agentrl.backends.base import SamplingParams, Teacher
from agentrl.chat.tokenizers import (
    TokenizerMismatchError,
    check_same_tokenizer,
    tokenizer_name,
)
from agentrl.recipes.tokenizer import bpe_tokenizer


def _backend(tokenizer: Any, seed: int = 0) -> Any:
    from agentrl.backends.local import LocalBackend

    return LocalBackend.tiny(tokenizer, seed=seed, device="cpu")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return bpe_tokenizer(["the teacher scores the student's tokens"] * 4, 300)


async def test_teacher_logprobs_equal_a_direct_forward_pass(tokenizer: Any) -> None:
    backend = _backend(tokenizer)
    sampler = await backend.sampler()
    assert isinstance(sampler, Teacher)
    tokens = tokenizer.encode("the teacher scores the student")
    got = await sampler.compute_logprobs(tokens)
    assert got[0] is None and len(got) == len(tokens)
    model = backend.engine.model
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens])).logits[0].float()
    direct = torch.log_softmax(logits, dim=-1)[:-1].gather(-1, torch.tensor(tokens[1:])[:, None])
    np.testing.assert_allclose(got[1:], direct[:, 0].numpy(), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="outside this model's vocabulary"):
        await sampler.compute_logprobs([1, 10**6])


async def test_a_teacher_of_the_same_weights_gives_zero_advantages(tokenizer: Any) -> None:
    """The student's sampled logprobs and the same weights' scores agree, so distillation
    from itself has nothing to teach (and another seed's weights do)."""
    from agentrl.algo.datums import completion_datum

    student = await _backend(tokenizer).sampler()
    prompt = tokenizer.encode("the teacher")
    (completion,) = await student.sample(prompt, 1, SamplingParams(max_tokens=6, seed=1))
    datum = completion_datum(prompt, completion.tokens, completion.logprobs)
    tokens = datum_tokens(datum)
    mask = datum.mask
    same = teacher_targets(datum, await student.compute_logprobs(tokens))
    (itself,) = distilled_datums([datum], [same])
    np.testing.assert_allclose(itself.advantages, 0.0, atol=1e-4)
    other = await _backend(tokenizer, seed=1).sampler()
    (taught,) = distilled_datums(
        [datum], [teacher_targets(datum, await other.compute_logprobs(tokens))]
    )
    assert np.abs(taught.advantages[mask > 0]).max() > 1e-2
    assert np.all(taught.advantages[mask == 0] == 0)


def test_a_teacher_with_another_tokenizer_is_refused(tokenizer: Any, qwen_tokenizer: Any) -> None:
    check_same_tokenizer(
        tokenizer, bpe_tokenizer(["the teacher scores the student's tokens"] * 4, 300)
    )
    with pytest.raises(TokenizerMismatchError) as info:
        check_same_tokenizer(tokenizer, qwen_tokenizer, student_name="bpe-300")
    message = str(info.value)
    assert "bpe-300" in message and tokenizer_name(qwen_tokenizer) in message  # both named
    assert f"{len(tokenizer.get_vocab())} tokens" in message
    assert f"{len(qwen_tokenizer.get_vocab())} tokens" in message
