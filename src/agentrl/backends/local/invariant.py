"""Batch-invariant decoding on the CPU: a row's logits do not depend on the rows beside it.

The sampler batches whatever requests have arrived, so which rows share a decoding step
depends on timing. Two float effects would then leak timing into the run:

- attention over a left-padded batch: the padding shifts a row's keys, which changes the
  order of the float reductions (differences of ~1e-7, enough to flip a sampled token now and
  then and to change every recorded logprob);
- matrix products: MKL's float32 GEMM computes a row differently in small products than in
  large ones. Measured with torch 2.13 (MKL 2024.2), 1-2 threads, at the shapes of the tiny
  model and of Qwen3 0.6B / 4B: on an AVX2 CPU the rows come in blocks of 4, and 1-3 rows or a
  ragged last block take another kernel; on an AVX-512 CPU every product of fewer than 16 rows
  (fewer than 9 at the tiny model's 192-wide inner dimension) rounds differently from a
  larger one, while any product of 16 rows or more agrees with every other.

The prefix KV cache adds a third: which prefix of a prompt is found cached depends on what
ran before (a sibling branch that shares the first prompt, another game that shares the system
prompt, an entry evicted under the memory budget), so the same prompt would be prefilled in
chunks cut at different places, and a token's keys rounded differently in a long chunk, a
short one, or a decoding step.

`ROWWISE` is an attention implementation (registered with transformers' attention and mask
interfaces) that computes each row of a one-token decoding step on its own keys, the padding
sliced off, and, in a prefill that passes `PREFILL_ROWS` (`ModelEngine.prefill`), each query
on its own causal keys, by the very call a decoding step makes for it; every other call
(training forwards, scoring) is plain SDPA. `generate` pads each decoding batch with idle rows
to `decode_rows(live)`, and a prefill pads its chunk with idle tokens to `decode_rows(chunk)`
rows: at least `DECODE_MIN_ROWS`, and a multiple of `DECODE_ROW_MULTIPLE`, which satisfies
both CPUs. Together, a token's keys and values are a function of the tokens up to it and the
weights alone, whether it was prefilled in any chunk or decoded in any batch, so a request's
completions are a function of its prompt, its seed and the weights alone, whatever else is in
the batch or in the cache.
Across machines bit-identity is not promised: another CPU's kernels round differently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "DECODE_MIN_ROWS",
    "DECODE_ROW_MULTIPLE",
    "PREFILL_ROWS",
    "ROWWISE",
    "decode_rows",
    "use_rowwise_attention",
]

ROWWISE = "agentrl_rowwise"
"""Name of the batch-invariant attention implementation."""
PREFILL_ROWS = "agentrl_prefill_rows"
"""Keyword argument of the model's forward (passed on to the attention implementation) that
marks an invariant prefill: its value is the chunk's real tokens, the rest idle padding."""
DECODE_ROW_MULTIPLE = 4
"""Decoding batches are padded to a multiple of this many rows (measured on AVX2: with 1-8
threads, a row's product is bit-identical in any batch of 4k rows, not in a ragged one)."""
DECODE_MIN_ROWS = 16
"""Decoding batches have at least this many rows (measured on AVX-512: products of fewer rows
take MKL's small-matrix kernels, which round differently)."""


_SDPA_GQA_MAX_DIM = 256
"""Largest head dim for which transformers' SDPA attention shares key heads with
`enable_gqa` on the CPU (`use_gqa_in_sdpa`); above it, it takes another path."""


def decode_rows(live: int) -> int:
    """Rows of a batch-invariant decoding step with `live` live rows: `live` rounded up to a
    multiple of `DECODE_ROW_MULTIPLE`, and at least `DECODE_MIN_ROWS`."""
    return max(DECODE_MIN_ROWS, -(-live // DECODE_ROW_MULTIPLE) * DECODE_ROW_MULTIPLE)


def _first_valid(mask: torch.Tensor | None, rows: int, width: int) -> list[int]:
    """Per row, the index of the first key position it may attend to (left padding before
    it), read from the mask's last query row in one pass."""
    if mask is None:
        return [0] * rows
    keys = mask[:, 0, -1, :width].expand(rows, -1)  # a broadcast mask serves every row
    allowed = keys if keys.dtype == torch.bool else keys == 0
    starts: list[int] = allowed.int().argmax(dim=-1).tolist()  # 0 where no key is allowed
    return starts


def rowwise_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA; for a one-token query, row by row over the unpadded keys of each row; in a
    prefill marked with `PREFILL_ROWS`, query by query over its causal keys."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    real: int | None = kwargs.pop(PREFILL_ROWS, None)
    if query.shape[2] != 1 and real is not None:
        return _prefill_attention(module, query, key, value, real, **kwargs)
    if query.shape[2] != 1:
        result: tuple[torch.Tensor, None] = sdpa_attention_forward(
            module, query, key, value, attention_mask, **kwargs
        )
        return result
    starts = _first_valid(attention_mask, query.shape[0], key.shape[2])
    attend = one_query_attention(module, key, value, kwargs)
    rows = [
        attend(query[row : row + 1], key[row : row + 1, :, start:], value[row : row + 1, :, start:])
        for row, start in enumerate(starts)
    ]
    return torch.cat(rows).transpose(1, 2).contiguous(), None


def _prefill_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    real: int,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of a one-row prefill chunk, each of its first `real` queries alone over the
    keys up to its own position (the call a decoding step makes for that token); the idle
    queries after them get zeros (their outputs are discarded)."""
    if query.shape[0] != 1:
        raise ValueError(f"an invariant prefill takes one row, got {query.shape[0]}")
    chunk = query.shape[2]
    offset = key.shape[2] - chunk
    attend = one_query_attention(module, key, value, kwargs)
    outputs = [
        attend(query[:, :, j : j + 1], key[:, :, : offset + j + 1], value[:, :, : offset + j + 1])
        for j in range(real)
    ]
    if real < chunk:
        outputs.append(outputs[0].new_zeros((1, outputs[0].shape[1], chunk - real, query.shape[3])))
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), None


def one_query_attention(
    module: torch.nn.Module, key: torch.Tensor, value: torch.Tensor, kwargs: dict[str, Any]
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The attention of one unmasked one-token query, `(1, heads, 1, dim)` in and out (not
    transposed), computed exactly as transformers' `sdpa_attention_forward` computes it.

    Where that function's CPU path is one `scaled_dot_product_attention` call (no dropout,
    softcap or position bias; the key heads shared with `enable_gqa`, as it does for head dims
    up to 256), the call is made directly: the same op on the same tensors, so the same bits,
    without the wrapper's per-call overhead (about a third of a call at the tiny model's
    shapes, and a prefill makes one call per token and layer). Otherwise the wrapper itself."""
    groups = int(getattr(module, "num_key_value_groups", 1))
    plain = (
        not kwargs.get("dropout")
        and kwargs.get("softcap") is None
        and kwargs.get("position_bias") is None
        and not kwargs.get("output_attentions", False)
        and key.shape[-1] == value.shape[-1] <= _SDPA_GQA_MAX_DIM
        and os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA", "0") != "1"
    )
    if not plain:
        return wrapped_attention(module, kwargs)
    scale: float | None = kwargs.get("scaling")
    extra = {"enable_gqa": True} if groups > 1 else {}

    def direct(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=0.0, scale=scale, is_causal=False, **extra
        )

    return direct


def wrapped_attention(
    module: torch.nn.Module, kwargs: dict[str, Any]
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """One unmasked one-token query through transformers' `sdpa_attention_forward` itself,
    shaped as `one_query_attention`'s (the fallback, and the baseline
    `benchmarks/invariant_prefill.py` measures the direct call against)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def wrapped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = sdpa_attention_forward(module, q, k, v, None, **kwargs)[0]
        return out.transpose(1, 2)

    return wrapped


def _register() -> None:
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    from transformers.modeling_utils import AttentionInterface

    if ROWWISE not in AttentionInterface._global_mapping:
        AttentionInterface.register(ROWWISE, rowwise_attention)
        AttentionMaskInterface.register(ROWWISE, sdpa_mask)


def use_rowwise_attention(model: Any) -> bool:
    """Switch `model` (a transformers model, possibly peft-wrapped) to `ROWWISE` attention.

    Returns False, leaving the model as it is, when the model does not support choosing its
    attention implementation or uses one other than SDPA (e.g. flash attention on a GPU)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    current = getattr(base.config, "_attn_implementation", None)
    if current == ROWWISE:
        return True
    if current != "sdpa" or not hasattr(base, "set_attn_implementation"):
        return False
    _register()
    base.set_attn_implementation(ROWWISE)
    return bool(base.config._attn_implementation == ROWWISE)
