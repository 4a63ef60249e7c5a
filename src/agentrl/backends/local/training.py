"""Forward/backward of the policy losses over datums, micro-batched by a token budget.

Normalisation: the summed per-token loss of every micro-batch is divided by the divisor of
the *whole* call (`agentrl.algo.losses.loss_divisor`: trained tokens by default, or datums, or a
constant), so the accumulated gradient equals that of one big batch whatever the micro-batch
size (see docs/backends.md). A datum is never split across micro-batches. With
`normalisation="sum"` the divisor is 1: a streamed batch (`agentrl.backends.local.streaming`)
accumulates such sums part by part and divides by the whole batch's divisor at the end.

KL penalty: the reference policy is the same model with the LoRA adapter disabled (peft's
`disable_adapter()` context, no gradient): no second copy of the weights, one extra forward
per micro-batch; in full fine-tuning, the frozen copy `ModelEngine.freeze_reference` took
(`LocalBackend.freeze_reference`).

Several processes (torchrun): with a `DistributedContext` every rank trains on its shard of
the same datums with the whole list's divisor, and the gradients are summed over the ranks
(`agentrl.backends.local.distributed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from agentrl.algo.datums import Datum, sequence_index
from agentrl.algo.losses import loss_divisor, policy_loss_sum
from agentrl.algo.mismatch import LogprobMismatch, logprob_mismatch
from agentrl.backends.base import ForwardBackwardResult, LossConfig, LossName
from agentrl.backends.local.distributed import (
    DistributedContext,
    shard_indices,
    trainable_parameters,
)
from agentrl.backends.local.engine import ModelEngine

__all__ = [
    "Normalisation",
    "batch_totals",
    "micro_batches",
    "run_forward_backward",
    "validate_datums",
]

Normalisation = Literal["tokens", "sum"]


def check_token_ids(ids: Sequence[int] | np.ndarray, vocab_size: int, what: str) -> None:
    """Raise ValueError naming `what` when a token id falls outside the model's vocabulary."""
    values = np.asarray(ids)
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        raise ValueError(
            f"{what} has token ids outside this model's vocabulary [0, {vocab_size}): was it "
            "tokenized for another model?"
        )


def validate_datums(datums: Sequence[Datum], vocab_size: int, max_length: int) -> None:
    """Raise ValueError naming the datum and field that cannot be trained on."""
    if not datums:
        raise ValueError("forward_backward got no datums")
    for index, datum in enumerate(datums):
        if len(datum) == 0:
            raise ValueError(f"datum {index} is empty")
        if len(datum) > max_length:
            raise ValueError(
                f"datum {index} has {len(datum)} tokens, more than the model's {max_length} "
                "positions; lower the trajectory token budget"
            )
        for name in ("model_input", "target_tokens"):
            check_token_ids(getattr(datum, name), vocab_size, f"datum {index}: {name}")
        for name in ("logprobs", "advantages", "mask"):
            if not np.all(np.isfinite(getattr(datum, name))):
                raise ValueError(f"datum {index}: {name} contains NaN or inf")


def batch_totals(datums: Sequence[Datum]) -> tuple[float, int]:
    """(trained tokens, sequences with a trained token): what `loss_divisor` takes. A sequence
    is a trajectory: its segments (consecutive datums of one `sequence` key) count once."""
    total_tokens = float(sum(d.mask.sum() for d in datums))
    index = sequence_index(datums)
    sequences = len({index[i] for i, d in enumerate(datums) if d.mask.sum() > 0})
    return total_tokens, sequences


def micro_batches(
    lengths: Sequence[int], token_budget: int, sequences: Sequence[int] | None = None
) -> list[list[int]]:
    """Greedy packing of datum indices into padded batches of at most `token_budget` tokens
    (rows x longest row), shortest first so that rows of like length share a batch (episodes
    of 7 and 30 turns side by side would pad the short one to the long one's length, and the
    padding costs as much compute as tokens); a datum longer than the budget is alone.
    The order is a function of the lengths alone (a stable sort), so it is deterministic. The
    datums of one sequence (`sequences`: each datum's `sequence_index`) stay in one batch, in
    their order, so gspo's ratio and `sequence` normalisation see a whole trajectory (its
    segments together, over the budget if they must)."""
    owner = list(range(len(lengths))) if sequences is None else list(sequences)
    units: list[list[int]] = []
    for index in range(len(lengths)):
        if units and owner[units[-1][-1]] == owner[index]:
            units[-1].append(index)
        else:
            units.append([index])
    units.sort(key=lambda unit: max(lengths[i] for i in unit))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for unit in units:
        new_longest = max(longest, *(lengths[i] for i in unit))
        if current and new_longest * (len(current) + len(unit)) > token_budget:
            batches.append(current)
            current, new_longest = [], max(lengths[i] for i in unit)
        current.extend(unit)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def _tensor(
    rows: list[np.ndarray], width: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    out = np.zeros((len(rows), width), dtype=rows[0].dtype)
    for i, row in enumerate(rows):
        out[i, : row.size] = row
    return torch.as_tensor(out, dtype=dtype, device=device)


@dataclass
class _Sums:
    """What the micro-batches of one call (or of one rank's shard) add up."""

    loss: float = 0.0
    ratio: float = 0.0
    clipped: float = 0.0
    approx_kl: float = 0.0
    kl_ref: float = 0.0
    tis_weight: float = 0.0
    micro_batches: int = 0
    sampled: list[np.ndarray] = field(default_factory=list)
    recomputed: list[np.ndarray] = field(default_factory=list)

    def mismatch(self) -> LogprobMismatch | None:
        """Sampler-vs-trainer agreement over the trained tokens seen."""
        if not self.sampled:
            return None
        return logprob_mismatch(np.concatenate(self.sampled), np.concatenate(self.recomputed))


def run_forward_backward(
    engine: ModelEngine,
    datums: Sequence[Datum],
    loss: LossName,
    config: LossConfig,
    *,
    micro_batch_tokens: int,
    normalisation: Normalisation = "tokens",
    distributed: DistributedContext | None = None,
    agreed: bool | None = None,
) -> ForwardBackwardResult:
    """Accumulate gradients of `loss` over `datums` into the trainable parameters.

    With `distributed`, every rank passes the same `datums`: each trains on its shard
    (`shard_indices`), divided by the divisor of the whole list, and the gradients this call
    adds are summed over the ranks; the result reports the whole list (see
    `agentrl.backends.local.distributed`). The ranks first agree on the datums
    (`agreed_datums`), unless the caller already did: then `agreed` says whether rank 0's
    datums replaced this rank's."""
    datums = list(datums)
    broadcast = bool(agreed)
    if distributed is not None and agreed is None:  # first: every rank validates the same
        datums, broadcast = distributed.agreed_datums(
            datums, str(LossName(loss)), repr(config), normalisation
        )
    validate_datums(datums, engine.vocab_size, engine.max_positions)
    total_tokens, sequences = batch_totals(datums)
    divisor = loss_divisor(config, total_tokens, sequences) if normalisation == "tokens" else 1.0
    owners = sequence_index(datums)
    if distributed is None:
        sums = _accumulate(
            engine, datums, range(len(datums)), owners, loss, config, micro_batch_tokens, divisor
        )
        mismatch = sums.mismatch()
    else:
        shards = shard_indices([len(d) for d in datums], owners, distributed.world_size)
        with distributed.summed_gradients(trainable_parameters(engine.model)):
            sums = _accumulate(
                engine,
                datums,
                shards[distributed.rank],
                owners,
                loss,
                config,
                micro_batch_tokens,
                divisor,
            )
        sums, mismatch = _global_sums(distributed, sums)
    denom = max(total_tokens, 1.0)
    return ForwardBackwardResult(
        loss=sums.loss / divisor,
        num_tokens=int(total_tokens),
        metrics={
            "loss_sum": sums.loss,
            "loss_per_token": sums.loss / denom,
            "ratio_mean": sums.ratio / denom,
            "clip_fraction": sums.clipped / denom,
            "approx_kl": sums.approx_kl / denom,
            **({"kl_ref": sums.kl_ref / denom} if config.kl_coef > 0 else {}),
            **({"tis_weight_mean": sums.tis_weight / denom} if config.tis_cap else {}),
            "micro_batches": float(sums.micro_batches),
            "datums": float(len(datums)),
            **(
                {"ranks": float(distributed.world_size), "datums_from_rank0": float(broadcast)}
                if distributed is not None
                else {}
            ),
        },
        mismatch=mismatch,
    )


def _global_sums(
    distributed: DistributedContext, local: _Sums
) -> tuple[_Sums, LogprobMismatch | None]:
    """Every rank's sums added up (and their logprob mismatch merged)."""
    own = local.mismatch()
    tokens = own.tokens if own is not None else 0
    kl_sum = own.sampler_kl * own.tokens if own is not None else 0.0
    totals = distributed.sum_floats(
        [
            local.loss,
            local.ratio,
            local.clipped,
            local.approx_kl,
            local.kl_ref,
            local.tis_weight,
            float(local.micro_batches),
            kl_sum,
            float(tokens),
        ]
    )
    (largest,) = distributed.max_floats([own.max_abs_diff if own is not None else 0.0])
    loss, ratio, clipped, approx_kl, kl_ref, tis_weight, batches, kl_total, count = totals
    mismatch = None
    if count > 0:
        mismatch = LogprobMismatch(
            sampler_kl=kl_total / count, max_abs_diff=largest, tokens=round(count)
        )
    summed = _Sums(
        loss=loss,
        ratio=ratio,
        clipped=clipped,
        approx_kl=approx_kl,
        kl_ref=kl_ref,
        tis_weight=tis_weight,
        micro_batches=round(batches),
    )
    return summed, mismatch


def _accumulate(
    engine: ModelEngine,
    datums: Sequence[Datum],
    indices: Sequence[int],
    owners: Sequence[int],
    loss: LossName,
    config: LossConfig,
    micro_batch_tokens: int,
    divisor: float,
) -> _Sums:
    """Forward/backward of the datums at `indices` (micro-batched), each micro-batch's summed
    loss divided by `divisor` before its backward."""
    device = engine.device
    sums = _Sums()
    chosen = list(indices)
    packed = micro_batches(
        [len(datums[i]) for i in chosen], micro_batch_tokens, [owners[i] for i in chosen]
    )
    batches = [[chosen[j] for j in batch] for batch in packed]
    sums.micro_batches = len(batches)
    engine.model.train()
    try:
        for batch in batches:
            rows = [datums[i] for i in batch]
            width = max(len(d) for d in rows)
            mask = _tensor([d.mask for d in rows], width, torch.float32, device)
            if not bool((mask > 0).any()):
                continue
            ids = _tensor([d.model_input for d in rows], width, torch.long, device)
            # Rows are right-padded and attention is causal, so no real token ever sees a pad:
            # no attention mask is needed, and without one SDPA runs its fused causal kernel
            # instead of the masked path (the real tokens' states are unchanged).
            attention = None
            where = mask > 0
            hidden = engine.hidden_states(ids, attention)[where]
            logp_all = torch.log_softmax(engine.unembed(hidden), dim=-1)
            targets = _tensor([d.target_tokens for d in rows], width, torch.long, device)[where]
            logp = logp_all.gather(-1, targets[:, None])[:, 0]
            old = _tensor([d.logprobs for d in rows], width, torch.float32, device)[where]
            adv = _tensor([d.advantages for d in rows], width, torch.float32, device)[where]
            local = {owner: n for n, owner in enumerate(dict.fromkeys(owners[i] for i in batch))}
            row_owner = torch.tensor([local[owners[i]] for i in batch], device=device)
            rows_index = row_owner[:, None].expand(-1, width)
            ref = None
            if config.kl_coef > 0:
                ref = engine.reference_logprobs(ids, attention, where, targets)
            sums.sampled.append(old.detach().cpu().double().numpy())
            sums.recomputed.append(logp.detach().cpu().double().numpy())
            part = policy_loss_sum(
                logp,
                old,
                adv,
                mask[where],
                loss,
                config,
                sequence_ids=rows_index[where],
                ref_logprobs=ref,
            )
            (part.loss / divisor).backward()  # type: ignore[no-untyped-call]
            sums.loss += float(part.loss.detach())
            sums.ratio += part.ratio
            sums.clipped += part.clipped
            sums.approx_kl += part.approx_kl
            sums.kl_ref += part.kl_ref
            sums.tis_weight += part.tis_weight
    finally:
        engine.model.eval()
    return sums
