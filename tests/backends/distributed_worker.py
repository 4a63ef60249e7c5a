"""The scenarios of tests/backends/test_local_distributed.py: one update of a tiny local model.

Run as a script under torchrun (every rank runs every scenario and saves what it saw to
`<out>/<scenario>-rank<r>.pt`), and imported by the test, which runs the same scenarios on one
process as the reference. Rank r > 0 draws its initial weights with another seed (rank 0's are
broadcast when the backend is built) and, in `diverged`, is handed other datums.

    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        tests/backends/distributed_worker.py OUT_DIR
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentrl.algo.datums import Datum, trajectory_to_datum
from agentrl.backends.base import AdamParams, LossConfig, LossName, LossNormalisation
from agentrl.backends.local import DistributedContext, LocalBackend, LoraSpec
from agentrl.backends.local.model import qwen3_config, random_causal_lm
from agentrl.core.types import ParsedAction, StopReason, TaskInfo, Trajectory, Turn, TurnStatus

VOCAB = 512
ADAM = AdamParams(learning_rate=1e-2, grad_clip_norm=1.0)
CHECKPOINT = "update-0001"


@dataclass(frozen=True)
class Scenario:
    """One update: which datums, loss and backend."""

    count: int
    loss: LossName = LossName.PPO
    config: LossConfig = field(default_factory=LossConfig)
    full_finetune: bool = False
    sequences: tuple[str | None, ...] | None = None
    """`Datum.sequence` keys (segments of one trajectory share one)."""
    stream_at: int | None = None
    """Stream the batch in two parts split here (open_stream / add / add / finish)."""
    micro_batch_tokens: int = 8192
    save: bool = False
    diverged: bool = False
    """Ranks > 0 are handed other datums than rank 0."""


SCENARIOS = {
    # 4 datums of different lengths, several micro-batches per shard; rank 0 saves.
    "even": Scenario(4, micro_batch_tokens=120, save=True),
    # 5 datums (shards of unequal size), two of them the segments of one trajectory, gspo with
    # `sequence` normalisation (the divisor counts trajectories, not datums).
    "odd": Scenario(
        5,
        loss=LossName.GSPO,
        config=LossConfig(normalisation=LossNormalisation.SEQUENCE),
        sequences=("a", "a", "b", None, "c"),
    ),
    # every weight trains (embeddings and norms too); cross entropy.
    "full": Scenario(3, loss=LossName.CROSS_ENTROPY, full_finetune=True),
    # a streamed batch: each part sharded, one division by the whole batch's divisor.
    "stream": Scenario(5, stream_at=2),
    # one datum for two ranks: rank 1's shard is empty.
    "single": Scenario(1),
    # rollouts diverged: the ranks must train on rank 0's datums.
    "diverged": Scenario(3, diverged=True),
    "diverged-stream": Scenario(3, diverged=True, stream_at=1),
}


def make_datums(scenario: Scenario, seed: int = 0) -> list[Datum]:
    """Datums of multi-turn trajectories of different lengths, with stale logprobs and
    advantages of both signs (built by agentrl.algo.datums, so masks are the real ones)."""
    rng = np.random.default_rng(seed)
    datums: list[Datum] = []
    for index in range(scenario.count):
        prompt = tuple(int(t) for t in rng.integers(0, VOCAB, 6 + 7 * index))
        turns = []
        for turn in range(1 + index % 3):
            length = 3 + 2 * index + turn + seed  # another seed: other trained-token counts
            completion = tuple(int(t) for t in rng.integers(0, VOCAB, length))
            logprobs = tuple(float(x) for x in -rng.uniform(3.0, 9.0, len(completion)))
            turns.append(
                Turn(
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    logprobs=logprobs,
                    assistant_text="",
                    parsed=ParsedAction(action="look"),
                    status=TurnStatus.EXECUTED,
                    env_step=None,
                )
            )
            prompt = prompt + completion + tuple(int(t) for t in rng.integers(0, VOCAB, 4))
        trajectory = Trajectory(
            turns=tuple(turns),
            stop_reason=StopReason.ENV_DONE,
            won=False,
            group_id="g",
            task=TaskInfo(task_id="t"),
        )
        advantage = float(rng.normal())
        datum = trajectory_to_datum(trajectory, [advantage] * len(turns))
        key = scenario.sequences[index] if scenario.sequences is not None else None
        datums.append(replace(datum, sequence=key))
    return datums


def build(scenario: Scenario, distributed: DistributedContext | None, folder: Path) -> LocalBackend:
    """The tiny backend; ranks > 0 draw other initial weights (rank 0's are broadcast)."""
    seed = 0 if distributed is None else distributed.rank
    model = random_causal_lm(
        qwen3_config("tiny", vocab_size=VOCAB), seed=seed, device=torch.device("cpu")
    )
    return LocalBackend(
        model,
        lora=LoraSpec(rank=4),
        device="cpu",
        checkpoint_dir=folder,
        seed=seed,
        micro_batch_tokens=scenario.micro_batch_tokens,
        full_finetune=scenario.full_finetune,
        distributed=distributed,
    )


async def run(
    scenario: Scenario, distributed: DistributedContext | None, folder: Path
) -> dict[str, Any]:
    """One forward_backward (or stream) and one optim_step; what a rank saw."""
    backend = build(scenario, distributed, folder)
    seed = 1 if scenario.diverged and distributed is not None and distributed.rank > 0 else 0
    datums = make_datums(scenario, seed)
    if scenario.stream_at is not None:
        stream = backend.open_stream(scenario.loss, scenario.config)
        await stream.add(datums[: scenario.stream_at])
        await stream.add(datums[scenario.stream_at :])
        result = await stream.finish()
    else:
        result = await backend.forward_backward(datums, scenario.loss, scenario.config)
    named = sorted(backend.engine.model.named_parameters())
    grads = {n: p.grad.clone() for n, p in named if p.requires_grad and p.grad is not None}
    step = await backend.optim_step(ADAM)
    out: dict[str, Any] = {
        "loss": result.loss,
        "num_tokens": result.num_tokens,
        "metrics": dict(result.metrics),
        "mismatch": None
        if result.mismatch is None
        else (result.mismatch.sampler_kl, result.mismatch.max_abs_diff, result.mismatch.tokens),
        "grads": grads,
        "grad_norm": float(step["grad_norm"]),
        "weights": {n: p.detach().clone() for n, p in named if p.requires_grad},
    }
    if scenario.save:
        ref = await backend.save(CHECKPOINT)
        out["ref"] = (ref.name, ref.state_path, ref.sampler_path)
        out["saved_before_return"] = (Path(ref.state_path) / "agentrl_state.json").is_file()
    await backend.close()
    return out


async def fail_on_rank_1(distributed: DistributedContext, folder: Path) -> str:
    """Rank 1's forward raises; every rank must raise (none left waiting in the all-reduce),
    and the process group must still work after it. What each rank raised."""
    backend = build(SCENARIOS["even"], distributed, folder)
    if distributed.rank == 1:

        def broken(*_: Any) -> None:
            raise RuntimeError("injected failure on rank 1")

        backend.engine.model.get_input_embeddings().register_forward_pre_hook(broken)
    try:
        await backend.forward_backward(make_datums(SCENARIOS["even"]), LossName.PPO, LossConfig())
    except RuntimeError as exc:
        error = f"{type(exc).__name__}: {exc}"
    else:
        error = "nothing raised"
    distributed.agree(True)  # the group still answers
    await backend.close()
    return error


def main(out: Path) -> None:
    """Every scenario on this rank (the process group started once, for all of them)."""
    distributed = DistributedContext.from_env(device="cpu")
    if distributed is None:
        raise SystemExit("run me under torchrun with --nproc-per-node 2 or more")
    assert distributed.start()  # the backends then find the group and do not own it
    try:
        for name, scenario in SCENARIOS.items():
            result = asyncio.run(run(scenario, distributed, out / "checkpoints" / name))
            torch.save(result, out / f"{name}-rank{distributed.rank}.pt")
        error = asyncio.run(fail_on_rank_1(distributed, out / "checkpoints" / "failure"))
        (out / f"failure-rank{distributed.rank}.txt").write_text(error)
    finally:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
