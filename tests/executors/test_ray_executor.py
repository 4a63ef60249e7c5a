"""The Ray executor on a real two-node Ray cluster on loopback (a head and a second node, one
CPU each): a training update of the toy env and a pycode evaluation spread over both nodes
(the records say which node played each group), a killed actor losing only its group's
branches and being replaced, a node removed mid-batch losing only its group, a hung step cut
at the step timeout, and no actor left alive after `close()`. Needs the `ray` extra
(`pip install 'agentrl[ray]'`)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from agentrl.chat import ChatRenderer  # noqa: E402
from agentrl.cli import main  # noqa: E402
from agentrl.core.env import close_env_factory  # noqa: E402
from agentrl.core.types import StopReason, TaskInfo, TrajectoryGroup  # noqa: E402
from agentrl.executors import ExecutorKind, ExecutorOptions, Timeouts, executor_factory  # noqa: E402
from agentrl.executors.ray_cluster import RayExecutor  # noqa: E402
from agentrl.rollout import RolloutConfig, rollout_batch  # noqa: E402
from agentrl.testing import PolicySampler  # noqa: E402
from agentrl.testing.busy import BusySource, busy_protocol, busy_reply, busy_tasks  # noqa: E402
from agentrl.training.trainer import Trainer  # noqa: E402
from tests.helpers.trainer_helpers import toy_config, toy_trainer  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and a second node, one CPU each, and this process connected to them."""
    nodes = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, logging_level="WARNING", configure_logging=False)
    yield nodes
    ray.shutdown()
    nodes.shutdown()


async def play_busy(
    factory: Any, tokenizer: Any, tasks: list[TaskInfo], group_size: int, steps: int
) -> list[TrajectoryGroup]:
    """The perfect player on `tasks` of the busy env, one group each."""
    return await rollout_batch(
        tasks,
        env_factory=factory,
        sampler=PolicySampler(tokenizer, busy_reply),
        renderer=ChatRenderer(tokenizer),
        protocol=busy_protocol(),
        config=RolloutConfig(group_size=group_size, max_env_steps=steps, max_assistant_tokens=32),
        max_concurrent_groups=8,
    )


def node_ids() -> set[str]:
    return {n["NodeID"][:12] for n in ray.nodes() if n["Alive"]}


def node_of(placement: str | None) -> str:
    assert placement is not None and placement.startswith("node ")
    return placement.split()[1]


def alive_actors() -> set[str]:
    """Actor ids the cluster's control store lists as alive (the state API needs the
    dashboard, which the test cluster does not run)."""
    table = ray._private.state.actors()
    return {actor for actor, info in table.items() if info["State"] != "DEAD"}


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split()[2] != "Z"


def gone(pids: set[int], within: float = 15.0) -> bool:
    """Whether every process in `pids` exits within `within` seconds (Ray reaps a killed
    actor's worker process shortly after the kill)."""
    deadline = time.monotonic() + within
    while any(pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def pid_of(placement: str | None) -> int:
    assert placement is not None
    return int(placement.rsplit("pid ", 1)[1])


async def test_a_training_update_of_the_toy_env_runs_on_both_nodes(
    cluster: Cluster, tmp_path: Path, qwen_tokenizer: Any
) -> None:
    before = alive_actors()
    config = toy_config(
        tmp_path,
        max_steps=1,
        games_per_batch=4,
        group_size=2,
        env_executor="ray",
        ray_address=cluster.address,
    )
    trainer: Trainer = toy_trainer(config, qwen_tokenizer)
    factory = trainer.env_factory
    assert isinstance(factory, RayExecutor) and factory.pool.size == 2
    try:
        metrics = await trainer.update(1)
    finally:
        await trainer.close()
        assert factory is not None
        await close_env_factory(factory)
    assert metrics  # the update trained
    records = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    episodes = [r for r in records if r.get("placement") is not None]
    assert len(episodes) == 4 * 2
    assert {node_of(r["placement"]) for r in episodes} == node_ids()
    for group in {r["group_id"] for r in episodes}:  # a group is played by one actor
        assert len({r["placement"] for r in episodes if r["group_id"] == group}) == 1
    assert alive_actors() == before
    assert gone({pid_of(r["placement"]) for r in episodes})


def test_a_pycode_evaluation_runs_on_both_nodes(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = alive_actors()
    output = tmp_path / "solver.jsonl"
    flags = ["eval", "--env", "pycode", "--policy", "solver", "--split", "valid_unseen"]
    flags += ["--limit-per-split", "6", "--output", str(output)]
    flags += ["--env-executor", "ray", "--ray-address", cluster.address]
    assert main(flags) == 0
    assert "solver: 6 episodes played" in capsys.readouterr().out
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    episodes = [r["trajectory"] for r in lines if r["type"] == "episode"]
    assert len(episodes) == 6 and all(e["won"] for e in episodes)
    assert {node_of(e["placement"]) for e in episodes} == node_ids()
    assert alive_actors() == before


async def test_a_killed_actor_loses_only_its_branches(
    cluster: Cluster, qwen_tokenizer: Any
) -> None:
    before = alive_actors()
    factory = executor_factory(
        BusySource(burn_ms=1, steps=3, crash_task="busy-2"),
        ExecutorOptions(kind=ExecutorKind.RAY, ray_address=cluster.address),
    )
    assert isinstance(factory, RayExecutor)
    try:
        groups = await play_busy(factory, qwen_tokenizer, busy_tasks(5), 3, 5)
        # the killed actor is replaced: two actors again
        again = await play_busy(factory, qwen_tokenizer, busy_tasks(5)[3:], 1, 5)
        assert len({g.trajectories[0].placement for g in again}) == 2
        assert all(g.trajectories[0].won for g in again)
        assert len(alive_actors() - before) == 2
    finally:
        await factory.close()
    for group in groups:
        reasons = [t.stop_reason for t in group.trajectories]
        if group.task.task_id == "busy-2":
            assert reasons == [StopReason.ENV_ERROR] * 3
            assert all("the Ray actor died" in (t.error or "") for t in group.trajectories)
        else:
            assert reasons == [StopReason.WON] * 3
    assert alive_actors() == before


async def test_a_hung_step_is_cut_at_the_step_timeout(
    cluster: Cluster, qwen_tokenizer: Any
) -> None:
    before = alive_actors()
    factory = executor_factory(
        BusySource(burn_ms=1, steps=2, hang_task="busy-0"),
        ExecutorOptions(
            kind=ExecutorKind.RAY, ray_address=cluster.address, timeouts=Timeouts(step=5.0)
        ),
    )
    try:
        groups = await play_busy(factory, qwen_tokenizer, busy_tasks(3), 2, 4)
    finally:
        await close_env_factory(factory)
    by_task = {g.task.task_id: g.trajectories for g in groups}
    assert all("stepping took longer than 5s" in (t.error or "") for t in by_task["busy-0"])
    assert all(t.won for task in ("busy-1", "busy-2") for t in by_task[task])
    assert alive_actors() == before


def test_agentrl_train_on_pycode_runs_against_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    before = alive_actors()
    run = tmp_path / "run"
    flags = ["train", "--env", "pycode", "--base-model", "tiny", "--device", "cpu"]
    flags += ["--max-steps", "1", "--run-dir", str(run)]
    flags += ["--env-executor", "ray", "--ray-address", cluster.address]
    assert main(flags) == 0
    records = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    assert records and {node_of(r["placement"]) for r in records} <= node_ids()
    assert alive_actors() == before


async def test_an_env_that_cannot_be_built_is_reported_with_its_cause(
    cluster: Cluster, qwen_tokenizer: Any
) -> None:
    before = alive_actors()
    factory = executor_factory(
        BusySource(steps=0), ExecutorOptions(kind=ExecutorKind.RAY, ray_address=cluster.address)
    )
    assert isinstance(factory, RayExecutor)
    try:
        groups = await play_busy(factory, qwen_tokenizer, busy_tasks(3), 1, 2)
        assert factory.pool.started == 0
    finally:
        await factory.close()
    for group in groups:
        (t,) = group.trajectories
        assert t.stop_reason is StopReason.ENV_ERROR
        assert "could not be built" in (t.error or "") and "steps must be >= 1" in (t.error or "")
    assert alive_actors() == before


async def test_a_node_that_dies_mid_batch_loses_only_its_groups_branches(
    cluster: Cluster, qwen_tokenizer: Any
) -> None:
    """A third node joins, each of three groups is played by an actor on its own node, and
    that node is removed (its raylet and workers killed) while the groups step: the group it
    played ends with `env_error`, the other two win. (Last in the file: the cluster shrinks
    back to its two nodes.)"""
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    doomed_id = doomed.node_id[:12]
    before = alive_actors()
    factory = executor_factory(
        BusySource(burn_ms=600, steps=6),
        ExecutorOptions(kind=ExecutorKind.RAY, ray_address=cluster.address),
    )
    assert isinstance(factory, RayExecutor) and factory.pool.size == 3

    def placed() -> set[str]:  # the nodes of the actors that started
        started = [w.placement for w in factory.pool.workers]
        return {node_of(p) for p in started if p and p.startswith("node ")}

    try:
        batch = asyncio.create_task(play_busy(factory, qwen_tokenizer, busy_tasks(3), 1, 8))
        # removed as soon as the doomed node's actor plays (3.6 s of steps), not once all
        # three do: on a loaded machine the last can start seconds after the first
        while doomed_id not in placed():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        cluster.remove_node(doomed, allow_graceful=False)
        groups = await asyncio.wait_for(batch, 120)
    finally:
        await factory.close()
    by_node = {node_of(g.trajectories[0].placement): g.trajectories[0] for g in groups}
    assert set(by_node) == {doomed_id, *node_ids()}
    lost = by_node.pop(doomed_id)
    assert lost.stop_reason is StopReason.ENV_ERROR and "Ray actor died" in (lost.error or "")
    assert all(t.won for t in by_node.values())
    assert alive_actors() <= before
