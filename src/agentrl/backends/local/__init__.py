"""Local torch backend: LoRA training and KV-cache-reusing sampling (torch, transformers, peft).

Needs the `local` extra: `pip install 'agentrl[local]'`.
"""

from agentrl._optional import require

for _module in ("torch", "transformers", "peft"):
    require(_module, "local", "the local training backend")

from agentrl.backends.local.backend import LocalBackend  # noqa: E402
from agentrl.backends.local.distributed import DistributedContext  # noqa: E402
from agentrl.backends.local.generation import GenResult  # noqa: E402
from agentrl.backends.local.kvcache import PrefixKVCache  # noqa: E402
from agentrl.backends.local.model import LoraSpec, qwen3_config, select_device  # noqa: E402
from agentrl.backends.local.sampler import LocalSampler, SamplerStats  # noqa: E402

__all__ = [
    "DistributedContext",
    "GenResult",
    "LocalBackend",
    "LocalSampler",
    "LoraSpec",
    "PrefixKVCache",
    "SamplerStats",
    "qwen3_config",
    "select_device",
]
