"""The model shared by the local sampler and trainer: one lock, one weights version."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

import torch

from agentrl.backends.local.invariant import PREFILL_ROWS, decode_rows, use_rowwise_attention
from agentrl.backends.local.model import KV, cache_kwarg, kv_from_cache

__all__ = ["ModelEngine"]


class ModelEngine:
    """A peft-wrapped causal LM plus what sampling and training share about it.

    `lock` serialises model use between the sampler's worker thread and training calls;
    `version` increases whenever the weights change, which invalidates KV caches.
    """

    def __init__(
        self,
        model: Any,
        *,
        device: torch.device,
        default_stop_tokens: Sequence[int] = (),
    ) -> None:
        self.model = model
        self.base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.device = device
        self.dtype: torch.dtype = next(model.parameters()).dtype
        self.default_stop_tokens = tuple(default_stop_tokens)
        self.lock = threading.RLock()
        self.version = 0
        self._cache_kwarg = cache_kwarg(self.base)
        self.batch_invariant = device.type == "cpu" and use_rowwise_attention(model)
        """Decoding steps give each row the logits it would get alone (see `invariant`)."""
        config = self.base.config
        self.vocab_size: int = int(config.vocab_size)
        self.max_positions: int = int(getattr(config, "max_position_embeddings", 1 << 30))
        self.reference: Any | None = None
        """A frozen copy of the weights, the KL penalty's reference in full fine-tuning
        (`freeze_reference`); with LoRA the reference is the base model, adapter off."""

    def kv_bytes_per_token(self) -> int:
        """Bytes of keys and values that one cached token takes."""
        config = self.base.config
        heads = int(getattr(config, "num_key_value_heads", config.num_attention_heads))
        head_dim = int(
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        element = torch.empty((), dtype=self.dtype).element_size()
        return 2 * int(config.num_hidden_layers) * heads * head_dim * element

    def freeze_reference(self) -> None:
        """Take a frozen copy of the current weights as the KL reference (no gradient, eval
        mode): one more copy of the model in memory."""
        with self.lock:
            reference = copy.deepcopy(self.base).eval()
            reference.requires_grad_(False)
            self.reference = reference

    def reference_logprobs(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        where: torch.Tensor,
        targets: torch.Tensor,
    ) -> torch.Tensor:
        """Logprobs of `targets` at the positions `where` under the KL reference, no gradient:
        the frozen copy when `freeze_reference` made one, else the base model with the LoRA
        adapter disabled (peft's `disable_adapter()`: no second copy of the weights)."""
        with torch.no_grad():
            if self.reference is not None:
                out = self.reference.model(input_ids=input_ids, attention_mask=attention_mask)
                logits = self.reference.lm_head(out.last_hidden_state[where]).float()
            elif hasattr(self.model, "disable_adapter"):
                with self.model.disable_adapter():
                    logits = self.unembed(self.hidden_states(input_ids, attention_mask)[where])
            else:
                raise ValueError(
                    "a KL penalty (kl_coef > 0) needs a reference policy: with full "
                    "fine-tuning there is no adapter to switch off, so call "
                    "LocalBackend.freeze_reference() first (a frozen copy of the current "
                    "weights), or train LoRA"
                )
            logp_all = torch.log_softmax(logits, dim=-1)
            return logp_all.gather(-1, targets[:, None])[:, 0]

    def bump_version(self) -> None:
        """Record that the weights changed."""
        self.version += 1

    def hidden_states(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Final hidden states [B, T, H] of a full (uncached) forward pass."""
        out = self.base.model(input_ids=input_ids, attention_mask=attention_mask)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden

    def unembed(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (float32) for hidden states of any leading shape."""
        logits: torch.Tensor = self.base.lm_head(hidden)
        return logits.float()

    def step(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        cache: Any,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One forward appending to `cache`: float32 logits of the last position of each row."""
        out = self.base(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=attention_mask,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: cache},
        )
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits

    def prefill(self, tokens: Sequence[int], start: int, cache: Any) -> tuple[torch.Tensor, KV]:
        """Append `tokens` (one row, at positions `start`...) to `cache`: float32 logits
        after the last of them, and the keys/values of the `start + len(tokens)` positions.

        When `batch_invariant`, the chunk is padded with idle tokens to `decode_rows` rows and
        each query attends alone (`invariant.PREFILL_ROWS`), so every token's keys and values
        are bit for bit those of any other chunking of the same tokens, or of a decoding step
        that produced it: what the prefix cache held before does not change the run."""
        count = len(tokens)
        if count < 1:
            raise ValueError("prefill needs at least one token")
        if not self.batch_invariant:
            ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            positions = torch.arange(start, start + count, device=self.device)[None]
            return self.step(ids, positions, cache)[0], kv_from_cache(cache)
        rows = decode_rows(count)
        padded = [*tokens, *([tokens[-1]] * (rows - count))]
        ids = torch.tensor([padded], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + rows, device=self.device)[None]
        out = self.base.model(
            input_ids=ids,
            position_ids=positions,
            use_cache=True,
            **{self._cache_kwarg: cache, PREFILL_ROWS: count},
        )
        hidden: torch.Tensor = out.last_hidden_state[:, count - 1]
        end = start + count
        kv = [(k[:, :, :end], v[:, :, :end]) for k, v in kv_from_cache(cache)]
        return self.unembed(hidden)[0], kv

    def sequence_logprobs(self, tokens: Sequence[int]) -> torch.Tensor:
        """Logprob of each token given the previous ones (length len(tokens) - 1), no grad."""
        with self.lock, torch.no_grad():
            ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            logp = self._next_token_logprobs(ids)
            return logp.gather(-1, ids[0, 1:, None])[:, 0].cpu()

    def sequence_top_tokens(self, tokens: Sequence[int]) -> torch.Tensor:
        """The most likely token after each prefix `tokens[:i]`, i >= 1 (length
        len(tokens) - 1), no grad."""
        with self.lock, torch.no_grad():
            ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            return self._next_token_logprobs(ids).argmax(dim=-1).cpu()

    def _next_token_logprobs(self, ids: torch.Tensor) -> torch.Tensor:
        """Log-softmax over the vocabulary after each prefix of the one row `ids`."""
        hidden = self.hidden_states(ids)[0, :-1]
        return torch.log_softmax(self.unembed(hidden), dim=-1)
