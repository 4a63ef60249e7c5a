"""The PyTRIO / Tinker backend: remote LoRA training and sampling services.

`backend` (`PyTrioBackend`), `sampler` (`RemoteSampler`), `convert` (datums, completions and
limits to and from the SDKs' types), `sdk` (which SDK, API keys, connections). The SDKs are
imported only when a service is used (`pip install 'agentrl[pytrio]'` / `'agentrl[tinker]'`).
"""

from agentrl.backends.pytrio.backend import (
    MaskMode,
    MissingApiKeyError,
    PyTrioBackend,
    RemoteSampler,
    SdkName,
)

__all__ = ["MaskMode", "MissingApiKeyError", "PyTrioBackend", "RemoteSampler", "SdkName"]
