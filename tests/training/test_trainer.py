"""The training loop on the toy env with the real tiny local backend (torch steps on CPU)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from agentrl.checkpoints import latest_checkpoint
from agentrl.metrics import UpdateMetrics
from agentrl.records import read_records
from agentrl.reporting.sinks import Reportable
from agentrl.trainer import task_batch
from agentrl.types import TaskInfo
from tests.helpers.trainer_helpers import tiny_backend, toy_config, toy_trainer


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory, qwen_tokenizer: Any) -> Any:
    """One real tiny LocalBackend shared by the module (building one takes seconds)."""
    return tiny_backend(toy_config(tmp_path_factory.mktemp("tiny")), qwen_tokenizer)


def _tasks(n: int) -> list[TaskInfo]:
    return [TaskInfo(task_id=f"g{i:02d}") for i in range(n)]


def test_task_batches_are_a_pure_function_of_seed_and_index() -> None:
    tasks = _tasks(5)
    first = [task_batch(tasks, 2, 7, i) for i in range(5)]
    assert first == [task_batch(list(reversed(tasks)), 2, 7, i) for i in range(5)]
    stream = [t.task_id for batch in first for t in batch]
    # every pass (5 games) visits each game once, in a fresh order per pass
    assert sorted(stream[:5]) == sorted(stream[5:10]) == [t.task_id for t in tasks]
    assert stream[:5] != stream[5:10]
    assert task_batch(tasks, 2, 8, 0) != first[0] or task_batch(tasks, 2, 8, 1) != first[1]
    with pytest.raises(ValueError):
        task_batch([], 2, 0, 0)


def _games(run_dir: Path) -> list[tuple[int, list[str]]]:
    """(update, games in group order) from the rollouts file."""
    per_update: dict[int, list[str]] = {}
    for record in read_records(run_dir / "rollouts.jsonl"):
        update = int(record.extra["update"])
        if record.branch == 0:
            per_update.setdefault(update, []).append(record.task_id)
    return sorted(per_update.items())


def _lora(inner: Any) -> dict[str, Any]:
    return {
        name: p.detach().clone()
        for name, p in inner.engine.model.named_parameters()
        if p.requires_grad
    }


async def test_updates_train_log_and_checkpoint(
    tmp_path: Path, qwen_tokenizer: Any, inner: Any
) -> None:
    config = toy_config(tmp_path / "run", max_steps=3)
    trainer = toy_trainer(config, qwen_tokenizer, inner)
    before = _lora(inner)
    result = await trainer.run()
    assert result.last_update == 3
    assert [c.name for c in result.checkpoints] == ["update-0002", "update-0003"]
    trained = [m for m in result.metrics if m.loss is not None]
    assert trained, "the seeded policy gives groups different rewards: some update trains"
    for m in trained:
        assert m.trained_trajectories > 0 and m.trained_tokens > 0
        assert {"rollout", "advantages", "forward_backward", "optim_step", "total"} <= set(
            m.timings
        )
        assert "grad_norm" in m.backend
        # the sampler-vs-trainer mismatch of every trained update, for every sink (large here:
        # the scripted policy's logprobs are synthetic, not the model's)
        assert m.sampler_kl is not None and m.sampler_kl > 0.0
        assert m.logprob_diff_max is not None and m.logprob_diff_max > 0.0
        assert "train/sampler_kl" in m.as_flat(prefix="train")
    assert "save" in result.metrics[-1].timings
    after = _lora(inner)
    assert any(not bool((before[k] == after[k]).all()) for k in before)
    # metrics: one JSONL line per update with the documented fields
    lines = [json.loads(x) for x in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(x["type"], x["step"]) for x in lines] == [("train", 1), ("train", 2), ("train", 3)]
    assert lines[0]["groups"] == 2 and "success_by_task_type" in lines[0]
    assert {"reward_mean", "mean_invalid_actions", "truncation_rate"} <= set(lines[0]["stats"])
    # rollouts: every trajectory of every update, as text
    assert [u for u, _ in _games(config.run_dir)] == [1, 2, 3]
    # checkpoint records point at the backend's state and sampler weights
    latest = latest_checkpoint(config.run_dir)
    assert latest is not None and latest.update == 3
    assert (Path(latest.sampler_path) / "adapter_model.safetensors").is_file()
    # a finished run folder is never silently reused
    with pytest.raises(FileExistsError, match="--resume"):
        await toy_trainer(config, qwen_tokenizer, inner).run()


class _CancelAfter:
    """A sink that cancels the training task once update `n` is logged."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.task: asyncio.Task[Any] | None = None
        self.logged: list[int] = []

    def log(self, kind: str, step: int, record: Reportable) -> None:
        assert isinstance(record, UpdateMetrics)
        self.logged.append(step)
        if step == self.n and self.task is not None:
            self.task.cancel()  # what Ctrl-C does to `asyncio.run`'s main task

    def close(self) -> None:
        pass


async def test_interrupted_then_resumed_run_plays_the_same_games(
    tmp_path: Path, qwen_tokenizer: Any, inner: Any
) -> None:
    # The policy-driven sampler does not depend on the weights, so one backend serves all
    # three runs; what is compared is the game sequence and the update counter.
    small = {"max_steps": 3, "save_every": 3, "group_size": 2, "max_episode_steps": 3}
    straight = toy_config(tmp_path / "straight", **small)
    await toy_trainer(straight, qwen_tokenizer, inner).run()

    broken = toy_config(tmp_path / "broken", **small)
    sink = _CancelAfter(1)
    trainer = toy_trainer(broken, qwen_tokenizer, inner, sinks=sink)
    task = asyncio.ensure_future(trainer.run())
    sink.task = task
    with pytest.raises(asyncio.CancelledError):
        await task
    # the interrupt saved the last completed update (save_every=3 would not have)
    assert trainer.completed == 1 and sink.logged == [1]
    latest = latest_checkpoint(broken.run_dir)
    assert latest is not None and (latest.name, latest.update) == ("update-0001", 1)
    assert [u for u, _ in _games(broken.run_dir)] == [1]  # update 2 left no partial trace

    resumed_config = broken.model_copy(update={"resume": True})
    resumed = toy_trainer(resumed_config, qwen_tokenizer, inner)
    result = await resumed.run()
    assert resumed.backend.loads == ["update-0001"]  # type: ignore[attr-defined]
    assert [m.update for m in result.metrics] == [2, 3]
    assert result.last_update == 3
    assert _games(broken.run_dir) == _games(straight.run_dir)
    assert len(_games(straight.run_dir)) == 3

    # resuming with settings that change the game order is refused
    other = broken.model_copy(update={"resume": True, "seed": 1, "max_steps": 6})
    with pytest.raises(ValueError, match="game order"):
        await toy_trainer(other, qwen_tokenizer, inner).run()
