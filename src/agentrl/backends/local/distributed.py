"""Data-parallel training of the local backend over `torch.distributed` (launched by torchrun).

Every rank runs the same trainer and hands `forward_backward` the same full list of datums (the
rollouts are replicated: keyed sampling seeds make them identical). Each rank then trains on
its own shard of that list and the shards' gradients are summed, so one step sees

    sum over ranks of grad(sum_{t in shard r} c_t l_t) / D  ==  grad(sum_t c_t l_t) / D

with `D` the divisor of the WHOLE list (`agentrl.algo.losses.loss_divisor`: its trained tokens,
its sequences or the constant), which every rank computes from the full list with no message:
the gradient of the single-process call, up to float rounding. The summed gradients are
bit-identical on every rank, so the optimizer steps (and the weights) stay identical without
further messages.

Why a plain gradient all-reduce (DDP semantics) and not `DistributedDataParallel` or FSDP2:
the local backend calls the base model's parts (`ModelEngine.hidden_states` / `unembed`), not
`module.forward`, runs a rank-dependent number of micro-batches (token-budget packing, shards of
unequal size, possibly none), and skips micro-batches without a trained token; DDP needs every
backward to go through its wrapper's forward and every rank to run the same number of them
(`no_sync` / `join`). One bucketed all-reduce after the call's last backward has none of these
constraints and costs the same bytes; with LoRA (a few MB of gradients) there is no overlap of
communication and compute worth having. FSDP2 (sharding weights and optimizer state for models
that do not fit one device) is not implemented.

Shards (`shard_indices`): whole sequences (the segments of one trajectory stay together, as in
`micro_batches`), balanced by token count (longest first onto the least-loaded rank), each
shard in the list's order; every rank computes the same assignment from the same list. Before
sharding the ranks compare a fingerprint of their datums (and of the loss); when rollouts
diverged (GPU kernels are not always deterministic), rank 0's datums are broadcast and trained
on every rank (metric `datums_from_rank0` = 1), so the ranks never train on different
batches. Checkpoints are written by rank 0 only; the others wait for it and return its
`CheckpointRef`; the files are those of a single-process run and load on one process.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from agentrl.algo.datums import Datum
from agentrl.backends.local.model import select_device

__all__ = [
    "BUCKET_BYTES",
    "CommBackend",
    "DistributedContext",
    "RankFailure",
    "datums_fingerprint",
    "device_for",
    "module_tensors",
    "shard_indices",
    "trainable_parameters",
]

log = logging.getLogger(__name__)

CommBackend = Literal["gloo", "nccl"]
"""The torch.distributed backend: gloo for CPU tensors, nccl for CUDA ones."""

BUCKET_BYTES = 25 << 20
"""Gradients are all-reduced in flat buckets of at most this many bytes (DDP's default)."""

_ENV_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

T = TypeVar("T")


class RankFailure(RuntimeError):
    """Another rank of the job failed in the same collective call; this rank stops too."""


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a torchrun job: its rank, the world size, its rank on this
    node (its GPU) and the collective backend. A context holds no torch state: the process
    group it starts is torch's default group (a process-wide global of torch.distributed)."""

    rank: int
    world_size: int
    local_rank: int
    backend: CommBackend
    bucket_bytes: int = BUCKET_BYTES
    """Size limit of one flat all-reduce / broadcast buffer."""

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in a world of size {self.world_size}")
        if self.local_rank < 0:
            raise ValueError(f"local_rank must be >= 0, got {self.local_rank}")
        if self.backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be gloo or nccl, got {self.backend!r}")
        if self.bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be >= 1, got {self.bucket_bytes}")

    @classmethod
    def from_env(
        cls,
        device: str | torch.device | None = "auto",
        environ: Mapping[str, str] | None = None,
    ) -> DistributedContext | None:
        """The context torchrun's variables describe (RANK, WORLD_SIZE, LOCAL_RANK,
        MASTER_ADDR, MASTER_PORT); None when WORLD_SIZE is unset or 1 (a single process, whose
        behaviour is then untouched). nccl when `device` is (or "auto" finds) CUDA, else gloo."""
        env = os.environ if environ is None else environ
        world = env.get("WORLD_SIZE", "").strip()
        if not world or _int_var(env, "WORLD_SIZE") == 1:
            return None
        missing = [name for name in _ENV_VARS if not env.get(name, "").strip()]
        if missing:
            raise ValueError(
                f"WORLD_SIZE={world} but {', '.join(missing)} is not set: launch with "
                "`torchrun --nproc-per-node N ...` (it sets RANK, LOCAL_RANK, MASTER_ADDR and "
                "MASTER_PORT)"
            )
        rank = _int_var(env, "RANK")
        local_rank = _int_var(env, "LOCAL_RANK") if env.get("LOCAL_RANK") else rank
        backend: CommBackend = "nccl" if select_device(device).type == "cuda" else "gloo"
        return cls(rank, _int_var(env, "WORLD_SIZE"), local_rank, backend)

    @property
    def is_main(self) -> bool:
        """Rank 0: the rank that writes checkpoints."""
        return self.rank == 0

    @property
    def comm_device(self) -> torch.device:
        """Where the tensors of collectives live: this rank's GPU under nccl, else the CPU."""
        if self.backend == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")

    def start(self) -> bool:
        """Join the default process group (env:// rendezvous); True when this call created it,
        False when it already existed (it must then be this context's world)."""
        if dist.is_initialized():
            if dist.get_world_size() != self.world_size or dist.get_rank() != self.rank:
                raise RuntimeError(
                    f"a process group of rank {dist.get_rank()} / {dist.get_world_size()} "
                    f"exists, this context is rank {self.rank} / {self.world_size}"
                )
            return False
        if self.backend == "nccl":
            torch.cuda.set_device(self.comm_device)
            dist.init_process_group(
                "nccl", rank=self.rank, world_size=self.world_size, device_id=self.comm_device
            )
        else:
            dist.init_process_group("gloo", rank=self.rank, world_size=self.world_size)
        return True

    # -- collectives (every rank calls each one, in the same order) ------------------------

    def agree(self, ok: bool) -> bool:
        """True when every rank says `ok`; also a barrier (no rank returns before all came)."""
        flag = torch.tensor([1 if ok else 0], dtype=torch.int64, device=self.comm_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item() == 1)

    def sum_floats(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the ranks (float64)."""
        return self._reduce(values, dist.ReduceOp.SUM)

    def max_floats(self, values: Sequence[float]) -> list[float]:
        """Element-wise maxima over the ranks (float64)."""
        return self._reduce(values, dist.ReduceOp.MAX)

    def _reduce(self, values: Sequence[float], op: dist.ReduceOp.RedOpType) -> list[float]:
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self.comm_device)
        dist.all_reduce(tensor, op=op)
        return [float(v) for v in tensor.cpu().tolist()]

    def same_everywhere(self, fingerprint: int) -> bool:
        """True when every rank passed the same `fingerprint` (a 56-bit integer)."""
        pair = torch.tensor([fingerprint, -fingerprint], dtype=torch.int64, device=self.comm_device)
        dist.all_reduce(pair, op=dist.ReduceOp.MAX)
        highest, lowest = int(pair[0].item()), -int(pair[1].item())
        return highest == lowest

    def broadcast_object(self, value: T) -> T:
        """Rank 0's `value` on every rank (pickled; the ranks of one job trust each other)."""
        box: list[object] = [value]
        dist.broadcast_object_list(box, src=0, device=self.comm_device)
        return box[0]  # type: ignore[return-value]

    def broadcast_tensors(self, tensors: Sequence[torch.Tensor]) -> None:
        """Overwrite `tensors` with rank 0's values (flat buckets), e.g. the initial weights."""
        with torch.no_grad():
            for bucket in _buckets(tensors, self.bucket_bytes):
                flat = torch.cat([t.detach().reshape(-1) for t in bucket])
                dist.broadcast(flat, src=0)
                _unflatten(flat, bucket)

    def all_reduce_gradients(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum the gradients of `params` over the ranks, in place (in float32 when they are
        half precision). A parameter without a gradient on a rank counts as zero there; it is
        left without one only when no rank has one (AdamW then skips it, as on one process)."""
        if not params:
            return
        present = torch.tensor(
            [p.grad is not None for p in params], dtype=torch.int64, device=self.comm_device
        )
        dist.all_reduce(present, op=dist.ReduceOp.MAX)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        with torch.no_grad():
            for bucket in _buckets(grads, self.bucket_bytes):
                wide = torch.float32 if bucket[0].dtype in _HALF else bucket[0].dtype
                flat = torch.cat([g.reshape(-1).to(wide) for g in bucket])
                dist.all_reduce(flat, op=dist.ReduceOp.SUM)
                _unflatten(flat, bucket)
        for param, grad, known in zip(params, grads, present.cpu().tolist(), strict=True):
            param.grad = grad if known else None

    @contextmanager
    def summed_gradients(self, params: Sequence[torch.nn.Parameter]) -> Iterator[None]:
        """Around one call's backward passes: the gradients they add are summed over the ranks
        at the end and added to the ones the parameters held before (which were summed
        already and must not be summed again); on an error the earlier ones are restored. The
        ranks agree first that every one of them got through: a rank that raised tells the
        others, which raise `RankFailure` instead of waiting for it in the all-reduce."""
        held = [p.grad for p in params]
        for param in params:
            param.grad = None
        try:
            yield
        except Exception:  # the others are told before anyone reduces: all ranks raise
            for param, grad in zip(params, held, strict=True):
                param.grad = grad
            self.agree(False)
            raise
        except BaseException:  # an interrupt: torchrun stops every rank
            for param, grad in zip(params, held, strict=True):
                param.grad = grad
            raise
        if not self.agree(True):
            for param, grad in zip(params, held, strict=True):
                param.grad = grad
            raise RankFailure(
                "forward_backward failed on another rank (its own error is in that rank's "
                "log); this rank's gradients of the call are dropped, as everywhere"
            )
        self.all_reduce_gradients(params)
        for param, old in zip(params, held, strict=True):
            if old is None:
                continue
            if param.grad is None:
                param.grad = old
            else:
                param.grad = old.add_(param.grad)

    def from_main(self, work: Callable[[], T]) -> T | None:
        """Rank 0 runs `work` (e.g. writes a checkpoint) while the others wait; every rank
        returns rank 0's result. When `work` fails, rank 0 raises its error and the others
        return None."""
        result: T | None = None
        error: BaseException | None = None
        if self.is_main:
            try:
                result = work()
            except BaseException as exc:  # the others are told (None), then it is raised here
                error = exc
        shared = self.broadcast_object(result)
        if error is not None:
            raise error
        return shared

    def on_every_rank(self, work: Callable[[], None]) -> bool:
        """Every rank runs `work` (e.g. loads a checkpoint), then waits for the others; its
        own failure is raised, and False says that another rank's `work` failed."""
        error: BaseException | None = None
        try:
            work()
        except BaseException as exc:  # the others are told, then it is raised here
            error = exc
        everyone = self.agree(error is None)
        if error is not None:
            raise error
        return everyone

    def agreed_datums(self, datums: Sequence[Datum], *context: str) -> tuple[list[Datum], bool]:
        """`datums` when every rank holds the same ones (and the same `context`, e.g. the
        loss); otherwise rank 0's, broadcast to all (True: they had to be)."""
        own = list(datums)
        if self.same_everywhere(datums_fingerprint(own, *context)):
            return own, False
        if self.is_main:
            log.warning(
                "the ranks were given different datums (did their rollouts diverge?); "
                "training every rank on rank 0's"
            )
        return self.broadcast_object(own), True


_HALF = (torch.float16, torch.bfloat16)


def _int_var(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise ValueError(f"{name} must be an integer, got {env.get(name)!r}") from None


def _buckets(tensors: Sequence[torch.Tensor], limit: int) -> Iterator[list[torch.Tensor]]:
    """Consecutive runs of `tensors` of one dtype and device, each at most `limit` bytes (a
    larger tensor alone)."""
    bucket: list[torch.Tensor] = []
    size = 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        same = bool(bucket) and (bucket[0].dtype, bucket[0].device) == (
            tensor.dtype,
            tensor.device,
        )
        if bucket and (not same or size + nbytes > limit):
            yield bucket
            bucket, size = [], 0
        bucket.append(tensor)
        size += nbytes
    if bucket:
        yield bucket


def _unflatten(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    """Copy consecutive pieces of `flat` back into `tensors` (casting to their dtype)."""
    offset = 0
    for tensor in tensors:
        count = tensor.numel()
        tensor.copy_(flat[offset : offset + count].view_as(tensor))
        offset += count


def device_for(context: DistributedContext | None, device: torch.device) -> torch.device:
    """The device this rank trains on: under nccl its own GPU (`cuda:LOCAL_RANK`; "cuda" or
    "auto" name it, another index is refused), otherwise `device` unchanged."""
    if context is None or context.backend != "nccl":
        return device
    if device.type != "cuda":
        raise ValueError(f"the nccl backend needs a CUDA device, got {device}")
    if device.index is not None and device.index != context.local_rank:
        raise ValueError(
            f"rank {context.rank} (LOCAL_RANK {context.local_rank}) trains on cuda:"
            f"{context.local_rank}; pass --device cuda, not {device}"
        )
    return context.comm_device


def shard_indices(
    lengths: Sequence[int], sequences: Sequence[int], world_size: int
) -> list[list[int]]:
    """The datum indices each rank trains on: whole sequences (consecutive datums of one
    `sequence_index`), balanced by tokens (longest sequence first onto the least-loaded rank,
    ties to the lower rank), each rank's in the list's order. Deterministic: a function of the
    lengths alone; every datum is in exactly one shard; a shard may be empty."""
    if len(lengths) != len(sequences):
        raise ValueError(f"{len(lengths)} lengths but {len(sequences)} sequence indices")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    units: list[list[int]] = []
    for index, owner in enumerate(sequences):
        if units and sequences[units[-1][-1]] == owner:
            units[-1].append(index)
        else:
            units.append([index])
    cost = [sum(lengths[i] for i in unit) for unit in units]
    loads = [0] * world_size
    shards: list[list[int]] = [[] for _ in range(world_size)]
    for unit in sorted(range(len(units)), key=lambda u: (-cost[u], u)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        shards[rank].extend(units[unit])
        loads[rank] += cost[unit]
    return [sorted(shard) for shard in shards]


def datums_fingerprint(datums: Sequence[Datum], *context: str) -> int:
    """A 56-bit digest of the datums (every array, dtype and `sequence` key) and `context`."""
    digest = hashlib.blake2b(digest_size=7)
    for text in context:
        digest.update(text.encode() + b"\0")
    digest.update(len(datums).to_bytes(8, "little"))
    for datum in datums:
        digest.update(repr(datum.sequence).encode() + b"\0")
        for array in (
            datum.model_input,
            datum.target_tokens,
            datum.logprobs,
            datum.advantages,
            datum.mask,
        ):
            values = np.ascontiguousarray(array)
            digest.update(f"{values.dtype}:{values.shape}".encode())
            digest.update(values.tobytes())
    return int.from_bytes(digest.digest(), "little")


def module_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Every parameter and buffer of `model`, each once (tied weights are one tensor)."""
    seen: set[int] = set()
    tensors: list[torch.Tensor] = []
    for tensor in (*model.parameters(), *model.buffers()):
        if id(tensor) not in seen:
            seen.add(id(tensor))
            tensors.append(tensor)
    return tensors


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The trained parameters of `model`, sorted by name (the same order on every rank)."""
    return [p for _, p in sorted(model.named_parameters()) if p.requires_grad]
