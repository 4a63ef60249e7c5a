"""Conversions between agentrl records and the Tinker-style SDK types (pytrio or tinker).

Both SDKs share the type vocabulary (`ModelInput.from_ints`, `Datum(model_input,
loss_fn_inputs)`, `TensorData.from_numpy`, `SamplingParams`, `AdamParams`), so every function
takes the SDK's `types` module. For `ppo` and `importance_sampling` the SDK only sends
`target_tokens`, `logprobs` and `advantages`: a mask would be dropped silently, so the mask
reaches the service in one of two ways, chosen explicitly (`MaskMode`):

- `zero_advantage` (the published recipe, default): every target is sent, the mask becomes a
  zero advantage. The service counts every target that is not -100 as an active token, so
  system / user / tool tokens are in the loss denominator too.
- `ignore_index`: targets outside the mask are sent as -100, so only assistant tokens are
  active. Only for an SDK that accepts -100 (pytrio); tinker's losses are sums, where the two
  modes give the same gradient, and it is refused there.

A datum with an advantage outside its mask is rejected in both modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from agentrl.algo.datums import Datum
from agentrl.backends.base import (
    AdamParams,
    LossConfig,
    LossName,
    LossNormalisation,
    MaskMode,
    SamplingParams,
)
from agentrl.core.types import Completion, CompletionStop

__all__ = [
    "CLIPPED_LOSSES",
    "IGNORE_INDEX",
    "DatumTooLongError",
    "MaskMode",
    "RemoteLimits",
    "UnsupportedLossError",
    "check_datums_fit",
    "check_remote_loss",
    "completion_from_sequence",
    "loss_fn_config",
    "to_sdk_adam",
    "to_sdk_datum",
    "to_sdk_sampling_params",
]


IGNORE_INDEX = -100
"""The target id the services skip (neither trained nor counted as an active token)."""


@dataclass(frozen=True)
class RemoteLimits:
    """What the service accepts for one base model (None: not reported)."""

    max_seq_len: int | None = None
    """Longest training sample (tokens)."""
    max_tokens_per_request: int | None = None
    """Most tokens in one training request (the SDK splits batches; one datum must fit)."""
    max_sample_len: int | None = None
    """Longest prompt + completion for sampling."""
    max_batch_size: int | None = None
    """Most datums per training request (the SDK splits larger batches itself)."""

    @property
    def max_datum_tokens(self) -> int | None:
        """The longest datum that can be trained on, or None when unlimited."""
        limits = [x for x in (self.max_seq_len, self.max_tokens_per_request) if x is not None]
        return min(limits) if limits else None


class DatumTooLongError(ValueError):
    """A datum is longer than the remote service accepts."""


def check_datums_fit(datums: Sequence[Datum], limits: RemoteLimits, base_model: str) -> None:
    """Fail before any request is sent if a datum cannot fit the service's limits."""
    longest = limits.max_datum_tokens
    if longest is None:
        return
    for index, datum in enumerate(datums):
        if len(datum) > longest:
            raise DatumTooLongError(
                f"datum {index} has {len(datum)} tokens but the service accepts at most "
                f"{longest} per training sample for {base_model} (max_seq_len="
                f"{limits.max_seq_len}, max_tokens_per_request={limits.max_tokens_per_request}); "
                "lower the trajectory token budget (--max-trajectory-tokens)"
            )


CLIPPED_LOSSES = (LossName.PPO, LossName.CISPO, LossName.GSPO)
"""Losses whose server-side config carries the ratio clip thresholds."""


class UnsupportedLossError(ValueError):
    """The remote service has no server-side loss (or option) for what was asked."""


def check_remote_loss(
    loss: LossName, config: LossConfig, accepted: frozenset[str], service: str
) -> None:
    """Refuse, before any request, a loss or loss option the service cannot run.

    `accepted` is the SDK's own list of loss names (pytrio: `LOSS_INPUT_SCHEMAS`, tinker:
    `LossFnType`). The services normalise, clip and weight on their side, so a KL penalty, a
    TIS cap, a dual clip and a non-default normalisation exist only on the local backend.
    """
    loss = LossName(loss)
    if loss.value not in accepted:
        raise UnsupportedLossError(
            f"{service} has no server-side {loss.value!r} loss (it accepts "
            f"{', '.join(sorted(accepted))}); use another loss or the local backend"
        )
    unsupported = []
    if config.kl_coef > 0:
        unsupported.append(f"kl_coef={config.kl_coef} (KL penalty to a reference policy)")
    if config.tis_cap is not None:
        unsupported.append(f"tis_cap={config.tis_cap} (truncated importance sampling)")
    if config.dual_clip is not None:
        unsupported.append(f"dual_clip={config.dual_clip} (dual-clip PPO)")
    if LossNormalisation(config.normalisation) is not LossNormalisation.TOKENS:
        unsupported.append(f"normalisation={LossNormalisation(config.normalisation).value}")
    if unsupported:
        raise UnsupportedLossError(
            f"{service} computes the {loss.value} loss server-side and has no setting for "
            f"{'; '.join(unsupported)}: these run on the local backend only"
        )


def loss_fn_config(loss: LossName, config: LossConfig) -> dict[str, float] | None:
    """The SDK's `loss_fn_config` for `loss` (clip thresholds for ppo / cispo / gspo)."""
    if LossName(loss) in CLIPPED_LOSSES:
        return {"clip_low_threshold": config.clip_low, "clip_high_threshold": config.clip_high}
    return None


def to_sdk_datum(
    types: ModuleType,
    datum: Datum,
    loss: LossName,
    mask_mode: MaskMode = MaskMode.ZERO_ADVANTAGE,
) -> Any:
    """An SDK `Datum` carrying exactly the inputs `loss` uses, masked as `mask_mode` says."""
    model_input = types.ModelInput.from_ints([int(t) for t in datum.model_input])
    target_ids = np.asarray(datum.target_tokens, dtype=np.int64)
    if MaskMode(mask_mode) is MaskMode.IGNORE_INDEX:
        target_ids = np.where(datum.mask > 0, target_ids, IGNORE_INDEX).astype(np.int64)
    targets = types.TensorData.from_numpy(target_ids)
    if loss is LossName.CROSS_ENTROPY:
        weights = types.TensorData.from_numpy(np.asarray(datum.mask, dtype=np.float32))
        return types.Datum(
            model_input=model_input,
            loss_fn_inputs={"target_tokens": targets, "weights": weights},
        )
    outside = (datum.mask == 0) & (datum.advantages != 0)
    if np.any(outside):
        position = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"datum has a non-zero advantage at masked position {position}: the remote "
            f"{loss.value} loss ignores masks, so it would train on that token; build datums "
            "with agentrl.algo.datums.trajectory_to_datum"
        )
    return types.Datum(
        model_input=model_input,
        loss_fn_inputs={
            "target_tokens": targets,
            "logprobs": types.TensorData.from_numpy(np.asarray(datum.logprobs, np.float32)),
            "advantages": types.TensorData.from_numpy(np.asarray(datum.advantages, np.float32)),
        },
    )


def to_sdk_sampling_params(types: ModuleType, params: SamplingParams) -> Any:
    """SDK sampling parameters; no stop tokens keeps the model's implicit end-of-sequence."""
    return types.SamplingParams(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        seed=params.seed,
        stop=list(params.stop_tokens) if params.stop_tokens else None,
    )


def to_sdk_adam(types: ModuleType, adam: AdamParams) -> Any:
    """SDK Adam parameters (decoupled weight decay, global grad-norm clip; 0 disables)."""
    return types.AdamParams(
        learning_rate=adam.learning_rate,
        beta1=adam.beta1,
        beta2=adam.beta2,
        eps=adam.eps,
        weight_decay=adam.weight_decay,
        grad_clip_norm=adam.grad_clip_norm,
    )


def completion_from_sequence(sequence: Any, prefill_tokens: int | None = None) -> Completion:
    """A `Completion` from an SDK sampled sequence (tokens, logprobs, stop_reason)."""
    tokens = tuple(int(t) for t in sequence.tokens)
    logprobs = sequence.logprobs
    if logprobs is None or len(logprobs) != len(tokens):
        got = "none" if logprobs is None else str(len(logprobs))
        raise ValueError(
            f"the service returned {got} logprobs for {len(tokens)} sampled tokens; "
            "per-token logprobs are required for training"
        )
    cut = str(sequence.stop_reason).lower() in ("length", "max_tokens")
    return Completion(
        tokens=tokens,
        logprobs=tuple(float(x) for x in logprobs),
        stop_reason=CompletionStop.LENGTH if cut else CompletionStop.STOP,
        prefill_tokens=prefill_tokens,
    )
