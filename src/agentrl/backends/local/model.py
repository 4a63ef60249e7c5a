"""Model loading for the local backend: devices, dtypes, random Qwen3 models, LoRA via peft."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from agentrl._optional import require

__all__ = [
    "KV",
    "LoraSpec",
    "apply_lora",
    "cache_kwarg",
    "cache_select_rows",
    "default_dtype",
    "kv_from_cache",
    "kv_to_cache",
    "load_causal_lm",
    "qwen3_config",
    "random_causal_lm",
    "select_device",
    "tiny_dtype",
]

KV = list[tuple[torch.Tensor, torch.Tensor]]
"""Per-layer (keys, values), each of shape [rows, kv_heads, length, head_dim]."""

ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
UNEMBED_MODULES = ("lm_head",)


@dataclass(frozen=True)
class LoraSpec:
    """Which weights get LoRA adapters, and their size."""

    rank: int = 32
    alpha: float = 32.0
    """Scale is alpha / rank."""
    dropout: float = 0.0
    train_mlp: bool = True
    train_attn: bool = True
    train_unembed: bool = True
    target_modules: tuple[str, ...] | None = None
    """Explicit module names; when set, the three `train_*` switches are ignored."""

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"LoraSpec.rank must be >= 1, got {self.rank}")
        if not self.modules():
            raise ValueError("LoraSpec selects no module: enable train_mlp/attn/unembed")

    def modules(self) -> list[str]:
        """The peft `target_modules` list."""
        if self.target_modules is not None:
            return list(self.target_modules)
        names: list[str] = []
        if self.train_attn:
            names.extend(ATTENTION_MODULES)
        if self.train_mlp:
            names.extend(MLP_MODULES)
        if self.train_unembed:
            names.extend(UNEMBED_MODULES)
        return names


def select_device(device: str | torch.device | None = "auto") -> torch.device:
    """`"auto"`/None: CUDA when available, else CPU; otherwise the named device (checked)."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return resolved


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA, fp32 elsewhere."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def tiny_dtype(device: torch.device, *, full_finetune: bool) -> torch.dtype:
    """The weights' dtype of a from-scratch model: float32 when every weight is trained (Adam
    on bf16 weights loses any update below bf16's resolution: at lr 1e-4 every weight above
    ~0.05 in size, the norms' 1.0 at any lr <= 1e-3), else `default_dtype` (LoRA adapters are
    float32 anyway: peft upcasts them)."""
    return torch.float32 if full_finetune else default_dtype(device)


SizeName = Literal["tiny", "qwen3-0.6b", "qwen3-4b"]


def qwen3_config(size: SizeName, vocab_size: int, **overrides: Any) -> Any:
    """A Qwen3 architecture config: `tiny` for tests, or the public 0.6B / 4B shapes."""
    transformers = require("transformers", "local")
    shapes: dict[str, dict[str, Any]] = {
        "tiny": dict(
            hidden_size=64,
            intermediate_size=192,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
        ),
        "qwen3-0.6b": dict(
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
        ),
        "qwen3-4b": dict(
            hidden_size=2560,
            intermediate_size=9728,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
        ),
    }
    if size not in shapes:
        raise ValueError(f"unknown model size {size!r}; choose one of {sorted(shapes)}")
    kwargs: dict[str, Any] = dict(
        vocab_size=vocab_size,
        tie_word_embeddings=True,
        max_position_embeddings=40960,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        **shapes[size],
    )
    kwargs.update(overrides)
    return transformers.Qwen3Config(**kwargs)


def random_causal_lm(
    config: Any, *, seed: int, device: torch.device, dtype: torch.dtype | None = None
) -> Any:
    """A randomly initialised causal LM for `config`, built on `device` (deterministic per seed)."""
    transformers = require("transformers", "local")
    torch.manual_seed(seed)
    with torch.device(device):  # allocate (and initialise) where it will run
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=dtype or default_dtype(device)
        )
    return model.eval()


def load_causal_lm(
    path: str | Path,
    *,
    device: torch.device,
    dtype: torch.dtype | None = None,
    local_files_only: bool = True,
) -> Any:
    """Load a causal LM from a local directory or the Hugging Face cache."""
    transformers = require("transformers", "local")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), dtype=dtype or default_dtype(device), local_files_only=local_files_only
        )
    except OSError as exc:
        raise FileNotFoundError(
            f"cannot load a causal LM from {str(path)!r}: {exc}. Pass a local model directory "
            "(with config.json and weights) or a model id already in the Hugging Face cache."
        ) from exc
    return model.to(device).eval()


def apply_lora(model: Any, spec: LoraSpec, *, seed: int) -> Any:
    """Wrap `model` with fresh LoRA adapters (B = 0, so outputs are unchanged at first)."""
    peft = require("peft", "local")
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [m for m in spec.modules() if m not in present]
    if missing:
        raise ValueError(
            f"LoRA target modules {missing} do not exist in this model; available linear "
            f"layers include {sorted(n for n in present if n.endswith('proj'))[:12]}"
        )
    torch.manual_seed(seed)
    config = peft.LoraConfig(
        r=spec.rank,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=spec.modules(),
        bias="none",
    )
    with warnings.catch_warnings():
        # LoRA on a tied lm_head adapts the output projection only; that is intended.
        warnings.filterwarnings("ignore", message=".*tie_word_embeddings.*")
        # peft probes a property that transformers 5 deprecates; not ours to fix.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        return peft.get_peft_model(model, config)


def cache_kwarg(model: Any) -> str:
    """Name of the KV-cache argument of `model.forward` (`cache` in transformers 5)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _growing_layer_class() -> Any:
    base: Any = require("transformers.cache_utils", "local").DynamicLayer

    class GrowingLayer(base):  # type: ignore[misc,valid-type]
        """A KV layer with preallocated room: appending a token writes in place (no copy)."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, reserve: int) -> None:
            super().__init__()
            rows, heads, length, dim = keys.shape
            capacity = length + max(reserve, 1)
            self._k = keys.new_empty((rows, heads, capacity, dim))
            self._v = values.new_empty((rows, values.shape[1], capacity, values.shape[3]))
            self._k[:, :, :length] = keys
            self._v[:, :, :length] = values
            self.length = length
            self.device = keys.device
            self.is_initialized = True
            self._publish()

        def _publish(self) -> None:
            self.keys = self._k[:, :, : self.length]
            self.values = self._v[:, :, : self.length]

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            new = key_states.shape[-2]
            if self.length + new > self._k.shape[2]:
                grow = max(self._k.shape[2], new)
                self._k = torch.cat(
                    [self._k, self._k.new_empty(*self._k.shape[:2], grow, self._k.shape[3])], 2
                )
                self._v = torch.cat(
                    [self._v, self._v.new_empty(*self._v.shape[:2], grow, self._v.shape[3])], 2
                )
            self._k[:, :, self.length : self.length + new] = key_states
            self._v[:, :, self.length : self.length + new] = value_states
            self.length += new
            self._publish()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            self._k = self._k[indices]
            self._v = self._v[indices]
            self._publish()

    return GrowingLayer


_GROWING_LAYER: Any = None


def kv_to_cache(kv: Sequence[tuple[torch.Tensor, torch.Tensor]] | None, *, reserve: int = 0) -> Any:
    """A transformers `DynamicCache` holding a copy of `kv` with room for `reserve` more tokens."""
    global _GROWING_LAYER
    transformers = require("transformers", "local")
    cache = transformers.DynamicCache()
    if kv:
        if _GROWING_LAYER is None:
            _GROWING_LAYER = _growing_layer_class()
        cache.layers = [_GROWING_LAYER(k, v, reserve) for k, v in kv]
    return cache


def kv_from_cache(cache: Any) -> KV:
    """The per-layer (keys, values) tensors of a cache (views; clone to keep them)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def cache_select_rows(cache: Any, rows: torch.Tensor) -> None:
    """Keep only `rows` (batch indices) of every layer of `cache`."""
    for layer in cache.layers:
        layer.batch_select_indices(rows)
