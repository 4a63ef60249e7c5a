"""Checks of a local checkpoint's files before anything loads them (stdlib only).

A LoRA adapter folder holds `adapter_config.json` (peft's settings; agentrl reads `r` and
`lora_alpha`) and `adapter_model.safetensors`: an 8-byte little-endian header length N, N bytes
of JSON header (per tensor: dtype, shape, `data_offsets` into the data that follows), then the
tensor data. A file cut by a crash or a full disk fails these checks with a `CheckpointError`
naming the file, instead of an error from deep inside a loader.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from agentrl.core.errors import CheckpointError

__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_WEIGHTS",
    "AdapterSettings",
    "check_adapter_dir",
    "check_safetensors",
    "read_json_object",
]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"

_DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "U16": 2,
    "I16": 2,
    "F16": 2,
    "BF16": 2,
    "U32": 4,
    "I32": 4,
    "F32": 4,
    "U64": 8,
    "I64": 8,
    "F64": 8,
}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class AdapterSettings:
    """What agentrl reads from `adapter_config.json`."""

    rank: int
    alpha: float


def read_json_object(path: Path) -> dict[str, object]:
    """A JSON object file, or `CheckpointError` naming it (missing, cut, not an object)."""
    if not path.is_file():
        raise CheckpointError(path, "missing (the checkpoint is incomplete)")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(path, f"not valid JSON ({exc}); the file is damaged") from None
    if not isinstance(value, dict):
        raise CheckpointError(path, f"expected a JSON object, got {type(value).__name__}")
    return value


def check_safetensors(path: Path) -> int:
    """Check a safetensors file's header against its size; return the number of tensors."""
    if not path.is_file():
        raise CheckpointError(path, "missing (the checkpoint is incomplete)")
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise CheckpointError(path, f"cut: {size} bytes, shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > min(size - 8, _MAX_HEADER):
            raise CheckpointError(
                path, f"cut or not safetensors: header of {length} bytes in a {size}-byte file"
            )
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(path, "damaged: the safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "damaged: the safetensors header is not a JSON object")
    data = size - 8 - length
    end_max = 0
    tensors = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            begin, end = (int(x) for x in entry["data_offsets"])
            shape = [int(n) for n in entry["shape"]]
            dtype = str(entry["dtype"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(path, f"damaged: bad header entry for tensor {name!r}") from None
        width = _DTYPE_BYTES.get(dtype)
        if not 0 <= begin <= end or (width is not None and end - begin != width * math.prod(shape)):
            raise CheckpointError(path, f"damaged: tensor {name!r} has inconsistent offsets")
        end_max = max(end_max, end)
        tensors += 1
    if end_max != data:
        raise CheckpointError(
            path,
            f"cut or damaged: the header describes {end_max} bytes of tensor data, the file "
            f"holds {data}",
        )
    return tensors


def check_adapter_dir(folder: Path) -> AdapterSettings:
    """Check a LoRA adapter folder (config and weights); return its rank and alpha."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(folder, "no such checkpoint folder")
    config_path = folder / ADAPTER_CONFIG
    settings = read_json_object(config_path)
    rank, alpha = settings.get("r"), settings.get("lora_alpha")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise CheckpointError(
            config_path, f'needs "r" (the LoRA rank, a positive integer), got {rank!r}'
        )
    if not isinstance(alpha, int | float) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise CheckpointError(config_path, f'needs "lora_alpha" (a finite number), got {alpha!r}')
    check_safetensors(folder / ADAPTER_WEIGHTS)
    return AdapterSettings(rank=rank, alpha=float(alpha))
