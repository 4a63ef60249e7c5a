"""Data-parallel local training: two gloo ranks on CPU (the real torchrun) give the update of
one process.

One torchrun launch (module fixture, about 14 s on 2 cores) runs every scenario of
`tests/backends/distributed_worker.py` on 2 ranks; each test runs its scenario again on this
process and compares. Tolerances, and why:

- gradients (after `forward_backward`, before the step) `rtol=1e-4, atol=1e-7`, as the
  micro-batching tests: the shards are packed into other micro-batches and summed in another
  order, float32 rounding only (measured: at most ~5e-7 absolute, ~1e-6 of the largest
  element). This is the check that can fail: a dropped datum or a shard divided by its own
  token count instead of the whole list's changes the gradient by O(1) (a wrong divisor
  scales it, which Adam's first step and the norm clip would hide in the weights).
- the reported loss `rel=1e-6` (measured ~1e-8).
- the weights after one AdamW step `atol=1e-6` (measured at most 2.3e-7). Adam's first step
  moves a weight by `lr * g / (|g| + eps)`, so where `|g|` is near `eps` (1e-8) a rounding
  difference of 1e-10 in `g` moves the weight by up to 1e-4: the full fine-tune, whose
  embedding rows and MLP weights have such gradients, is compared at 1e-6 where `|g| > 1e-6`.
- the two ranks' gradients and weights: bit-identical (`torch.equal`).

A second launch runs the example of docs/distributed-training.md (about 10 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from agentrl.backends.base import CheckpointRef  # noqa: E402
from agentrl.backends.local import DistributedContext  # noqa: E402
from agentrl.backends.local.distributed import (  # noqa: E402
    datums_fingerprint,
    device_for,
    shard_indices,
)
from tests.backends import distributed_worker as worker  # noqa: E402
from tests.helpers.doc_examples import doc_example, expected_output  # noqa: E402
from tests.helpers.paths import DOCS, REPO, SRC  # noqa: E402

RANKS = 2
pytestmark = pytest.mark.xdist_group("torchrun")  # one torchrun launch for the module's tests


def torchrun(script: Path, *args: str, cwd: Path) -> str:
    """Run `script` on RANKS gloo processes with the real torchrun; what they printed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO), str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "OMP_NUM_THREADS": "1",
    }
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # rendezvous on a free local port
        "--nproc-per-node",
        str(RANKS),
        str(script),
        *args,
    ]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    return done.stdout


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where each rank saved each scenario (`<scenario>-rank<r>.pt`)."""
    out = tmp_path_factory.mktemp("distributed")
    torchrun(Path(worker.__file__), str(out), cwd=REPO)
    return out


def load(folder: Path, scenario: str, rank: int) -> dict[str, Any]:
    result: dict[str, Any] = torch.load(folder / f"{scenario}-rank{rank}.pt", weights_only=True)
    return result


async def reference(scenario: str, tmp_path: Path) -> dict[str, Any]:
    """The scenario on this one process (no process group)."""
    return await worker.run(worker.SCENARIOS[scenario], None, tmp_path / "single")


def assert_same_update(got: dict[str, Any], want: dict[str, Any], *, small: float = 0.0) -> None:
    """`got` (rank 0 of the job) is `want` (one process) up to float rounding; weights whose
    reference gradient is at most `small` are not compared (see the module docstring)."""
    assert got["num_tokens"] == want["num_tokens"]
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-6)
    assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-5)
    assert sorted(got["grads"]) == sorted(want["grads"]) != []
    for name, grad in want["grads"].items():
        torch.testing.assert_close(got["grads"][name], grad, rtol=1e-4, atol=1e-7, msg=name)
    assert sorted(got["weights"]) == sorted(want["weights"])
    for name, weight in want["weights"].items():
        grad = want["grads"].get(name)
        where = torch.ones_like(weight, dtype=torch.bool)
        if grad is not None and small > 0:
            where = grad.abs() > small
        torch.testing.assert_close(
            got["weights"][name][where], weight[where], rtol=0.0, atol=1e-6, msg=name
        )
    metrics, expected = got["metrics"], want["metrics"]
    for key in ("loss_sum", "loss_per_token", "ratio_mean", "clip_fraction", "approx_kl"):
        assert metrics[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-9), key
    assert metrics["datums"] == expected["datums"]
    assert metrics["ranks"] == RANKS and "ranks" not in expected
    kl, largest, tokens = got["mismatch"]
    assert tokens == want["mismatch"][2]
    assert largest == pytest.approx(want["mismatch"][1], rel=1e-5)
    assert kl == pytest.approx(want["mismatch"][0], rel=1e-6)


def assert_ranks_identical(folder: Path, scenario: str) -> dict[str, Any]:
    """Every rank reports the same result and holds bit-identical gradients and weights;
    rank 0's."""
    first = load(folder, scenario, 0)
    for rank in range(1, RANKS):
        other = load(folder, scenario, rank)
        assert other["loss"] == first["loss"] and other["metrics"] == first["metrics"]
        assert sorted(other["grads"]) == sorted(first["grads"])
        for name, grad in first["grads"].items():
            assert torch.equal(other["grads"][name], grad), (rank, name)
        for name, weight in first["weights"].items():
            assert torch.equal(other["weights"][name], weight), (rank, name)
    return first


@pytest.mark.parametrize("scenario", ["even", "odd", "stream", "single"])
async def test_two_ranks_make_the_single_process_update(
    ranks: Path, tmp_path: Path, scenario: str
) -> None:
    """LoRA: 4 datums; 5 (unequal shards) with two segments of one trajectory under gspo's
    `sequence` normalisation; a streamed batch in two parts; 1 datum (rank 1 has none)."""
    got = assert_ranks_identical(ranks, scenario)
    want = await reference(scenario, tmp_path)
    assert_same_update(got, want)
    assert got["metrics"]["datums_from_rank0"] == 0.0


async def test_full_finetune_on_two_ranks(ranks: Path, tmp_path: Path) -> None:
    got = assert_ranks_identical(ranks, "full")
    want = await reference("full", tmp_path)
    assert len(want["grads"]) == len(want["weights"])  # every weight trains
    assert_same_update(got, want, small=1e-6)


@pytest.mark.parametrize("scenario", ["diverged", "diverged-stream"])
async def test_diverged_datums_are_replaced_by_rank_0s(
    ranks: Path, tmp_path: Path, scenario: str
) -> None:
    """Rank 1 was handed other datums than rank 0 (in one call, or in a streamed batch's
    parts): both trained on rank 0's, with rank 0's divisor, and said so."""
    got = assert_ranks_identical(ranks, scenario)
    assert got["metrics"]["datums_from_rank0"] > 0.0
    assert_same_update(got, await reference(scenario, tmp_path))


async def test_rank_0_checkpoint_loads_on_one_process(ranks: Path, tmp_path: Path) -> None:
    """Only rank 0 wrote; rank 1 returned after the files were complete, with rank 0's
    reference; one process restores the trained weights from them exactly."""
    first, second = load(ranks, "even", 0), load(ranks, "even", 1)
    assert first["ref"] == second["ref"]
    assert second["saved_before_return"]
    root = ranks / "checkpoints" / "even"
    assert sorted(p.name for p in root.iterdir()) == [worker.CHECKPOINT]  # no temporary copy
    name, state_path, sampler_path = first["ref"]
    single = worker.build(worker.SCENARIOS["even"], None, tmp_path)
    await single.load(CheckpointRef(name, state_path, sampler_path))
    assert single.steps == 1 and single._optimizer is not None
    for param_name, param in sorted(single.engine.model.named_parameters()):
        if param.requires_grad:
            assert torch.equal(param.detach(), first["weights"][param_name]), param_name


def test_shards_cover_every_datum_once_keep_sequences_and_balance_tokens() -> None:
    lengths = [50, 10, 10, 30, 5, 40, 7]
    owners = [0, 1, 1, 2, 3, 4, 5]  # datums 1 and 2: the segments of one trajectory
    shards = shard_indices(lengths, owners, 2)
    assert sorted(i for shard in shards for i in shard) == list(range(len(lengths)))
    assert all(shard == sorted(shard) for shard in shards)
    assert any({1, 2} <= set(shard) for shard in shards)
    loads = [sum(lengths[i] for i in shard) for shard in shards]
    assert max(loads) - min(loads) <= max(lengths)
    assert shards == shard_indices(lengths, owners, 2)  # deterministic
    assert shard_indices([4], [0], 3) == [[0], [], []]
    assert shard_indices(lengths, owners, 1) == [list(range(len(lengths)))]


def test_from_env_reads_torchrun_variables() -> None:
    assert DistributedContext.from_env(environ={}) is None
    assert DistributedContext.from_env(environ={"WORLD_SIZE": "1", "RANK": "0"}) is None
    env = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    context = DistributedContext.from_env("cpu", environ=env)
    assert context == DistributedContext(rank=3, world_size=4, local_rank=1, backend="gloo")
    assert not context.is_main and context.comm_device == torch.device("cpu")
    assert device_for(context, torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="MASTER_PORT is not set"):
        DistributedContext.from_env("cpu", environ={**env, "MASTER_PORT": ""})
    with pytest.raises(ValueError, match="RANK must be an integer"):
        DistributedContext.from_env("cpu", environ={**env, "RANK": "x"})
    with pytest.raises(ValueError, match="not in a world"):
        DistributedContext.from_env("cpu", environ={**env, "RANK": "4"})


def test_nccl_ranks_train_on_their_own_gpu() -> None:
    context = DistributedContext(rank=5, world_size=8, local_rank=1, backend="nccl")
    assert context.comm_device == torch.device("cuda", 1)
    assert device_for(context, torch.device("cuda")) == torch.device("cuda", 1)
    assert device_for(context, torch.device("cuda", 1)) == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="pass --device cuda"):
        device_for(context, torch.device("cuda", 0))
    with pytest.raises(ValueError, match="needs a CUDA device"):
        device_for(context, torch.device("cpu"))


def test_fingerprint_sees_every_field() -> None:
    datums = worker.make_datums(worker.SCENARIOS["odd"])
    base = datums_fingerprint(datums, "ppo")
    assert base == datums_fingerprint(worker.make_datums(worker.SCENARIOS["odd"]), "ppo")
    assert 0 <= base < 1 << 56
    assert datums_fingerprint(datums, "gspo") != base
    assert datums_fingerprint(datums[:-1], "ppo") != base
    for field in ("model_input", "logprobs", "advantages", "mask"):
        changed = list(datums)
        values = np.array(getattr(datums[0], field), copy=True)
        values[-1] += 1
        changed[0] = replace(datums[0], **{field: values})
        assert datums_fingerprint(changed, "ppo") != base, field


def test_the_documented_script_runs_under_torchrun(tmp_path: Path) -> None:
    """docs/distributed-training.md's example on two ranks prints what the page says (once:
    rank 0 prints) and leaves one checkpoint."""
    page = DOCS / "distributed-training.md"
    source = doc_example(page, "ddp")
    script = tmp_path / "train_ddp.py"
    script.write_text(source, encoding="utf-8")
    printed = torchrun(script, cwd=tmp_path).splitlines()
    assert printed == expected_output(source)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["update-0001"]


def test_a_failure_on_one_rank_raises_on_every_rank(ranks: Path) -> None:
    """Rank 1's forward raised: rank 1 raises its own error, rank 0 a `RankFailure` saying
    another rank failed (instead of waiting for rank 1 in the all-reduce), and the process
    group still works afterwards (the script went on)."""
    assert (ranks / "failure-rank1.txt").read_text() == ("RuntimeError: injected failure on rank 1")
    assert (
        (ranks / "failure-rank0.txt")
        .read_text()
        .startswith("RankFailure: forward_backward failed on another rank")
    )
