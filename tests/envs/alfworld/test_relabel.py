"""Relabelled copies of ALFWorld games: a consistent renaming, and still the same game."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentrl.core.types import TaskInfo, ToolCall
from agentrl.envs.alfworld.relabel import (
    Relabel,
    RelabeledGroup,
    relabel_of,
    relabeled_tasks,
)

ROOM = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
    "around you, you see a bed 1, a diningtable 1, a drawer 2, a drawer 1, a garbagecan 1, "
    "and a sidetable 1.\n\nYour task is to: put some alarmclock on diningtable."
)
NAME = re.compile(r"\b[a-z]+ \d+\b")


def test_numbers_are_permuted_per_class_and_renamed_back() -> None:
    relabel = Relabel(key="k", numbers=15)
    for kind in ("drawer", "cabinet", "alarmclock"):
        forward = [relabel.number(kind, n) for n in range(1, 16)]
        assert sorted(forward) == list(range(1, 16))
        assert [relabel.number(kind, m, inverse=True) for m in forward] == list(range(1, 16))
    assert relabel.number("drawer", 27) == 27  # beyond `numbers`: kept
    assert [relabel.number("drawer", n) for n in range(1, 16)] != [
        relabel.number("cabinet", n) for n in range(1, 16)
    ]  # one permutation per class (equal by chance with probability 1/15!)
    command = "move alarmclock 2 to drawer 1"
    renamed = relabel.observation(command)
    assert renamed != command and relabel.command(renamed) == command


def test_the_first_observation_lists_the_same_room_shuffled() -> None:
    relabel = Relabel(key="copy-3")
    first = relabel.observation(ROOM, first=True)
    later = relabel.observation(ROOM)
    assert first.endswith("Your task is to: put some alarmclock on diningtable.")
    assert sorted(NAME.findall(first)) == sorted(NAME.findall(later))
    assert NAME.findall(first) != NAME.findall(later)  # this key's order differs from the room's
    assert relabel.observation(ROOM, first=True) == first  # a pure function of the key
    assert Relabel(key="copy-4").observation(ROOM, first=True) != first
    unshuffled = Relabel(key="copy-3", shuffle_listing=False)
    assert unshuffled.observation(ROOM, first=True) == later


def test_copies_are_named_and_keyed_by_seed_and_task() -> None:
    task = TaskInfo(task_id="game-a", task_type="pick_and_place_simple", path="/x")
    copies = relabeled_tasks([task], 3)
    assert [c.task_id for c in copies] == [f"game-a#relabel-{k}" for k in range(3)]
    assert {c.path for c in copies} == {"/x"}
    assert relabel_of(task, seed=0) is None
    keys = {relabel_of(c, seed=0).key for c in copies}  # type: ignore[union-attr]
    assert len(keys) == 3
    assert relabel_of(copies[0], seed=0) == relabel_of(copies[0], seed=0)
    assert relabel_of(copies[0], seed=1) != relabel_of(copies[0], seed=0)
    with pytest.raises(ValueError, match="copies must be >= 0"):
        relabeled_tasks([task], -1)
    with pytest.raises(ValueError, match="numbers must be >= 1"):
        Relabel(key="k", numbers=0)


class _Recorder:
    """A one-game `EnvGroup` at the network edge: records the commands the game receives."""

    def __init__(self) -> None:
        self.commands: list[object] = []

    task = TaskInfo(task_id="g")
    size = 1

    async def reset(self) -> list[Any]:
        from agentrl.core.types import EnvStep

        return [EnvStep(observation=ROOM, admissible_actions=("go to drawer 2",))]

    async def step(self, actions: Any) -> list[Any]:
        from agentrl.core.types import EnvStep

        self.commands.extend(actions)
        return [EnvStep(observation="You arrive at drawer 2. The drawer 2 is closed.")]

    async def close(self) -> None:
        pass


async def test_the_group_renames_both_ways() -> None:
    relabel = Relabel(key="k")
    inner = _Recorder()
    group = RelabeledGroup(inner, relabel)
    (first,) = await group.reset()
    drawer = relabel.observation("drawer 2")
    assert first.admissible_actions == (f"go to {drawer}",)
    (step,) = await group.step([f"go to {drawer}"])
    assert step.observation == f"You arrive at {drawer}. The {drawer} is closed."
    await group.step([(ToolCall("alfworld_step", {"action": f"open {drawer}"}),)])
    assert inner.commands == [
        "go to drawer 2",
        (ToolCall("alfworld_step", {"action": "open drawer 2"}),),
    ]


async def test_the_explorer_wins_relabeled_copies_of_generated_games(alfworld_games: Any) -> None:
    """Every copy is a playable game: the explorer (listed order, plain protocol) wins the
    copies through the real engine, searching the copy's own shuffled listing, and a copy's
    episode names only the copy's names."""
    pytest.importorskip("transformers")
    from agentrl.envs.alfworld import AlfworldEnvOptions, EnvWorkerPool, alfworld_group_factory
    from agentrl.envs.alfworld.relabel import RelabelingFactory
    from agentrl.envs.alfworld.tools import alfworld_plain_protocol
    from agentrl.recipes.tokenizer import bpe_tokenizer
    from tests.helpers.explorer_helpers import explorer_episodes

    protocol = alfworld_plain_protocol()
    tokenizer = bpe_tokenizer([], 0)
    games = alfworld_group_factory(AlfworldEnvOptions(max_steps=50), EnvWorkerPool(2))
    factory = RelabelingFactory(games, seed=0)
    tasks = [g.to_task() for g in alfworld_games.games]
    copies = relabeled_tasks(tasks, 1)

    try:
        originals = await explorer_episodes(tasks, factory, protocol, "listed", tokenizer)
        relabeled = await explorer_episodes(copies, factory, protocol, "listed", tokenizer)
    finally:
        await factory.close()
    won = [g.trajectories[0].won for g in relabeled]
    assert sum(won) >= len(won) - 1, won
    differ = 0
    for original, copy in zip(originals, relabeled, strict=True):
        real = original.trajectories[0].turns[0]
        seen = copy.trajectories[0].turns[0]
        real_text = tokenizer.decode(list(real.prompt_tokens))
        copy_text = tokenizer.decode(list(seen.prompt_tokens))
        differ += real_text != copy_text
        relabel = relabel_of(copy.task, seed=0)
        assert relabel is not None
        listed = set(NAME.findall(copy_text))
        assert listed == {relabel.observation(n) for n in NAME.findall(real_text)}
        for turn in copy.trajectories[0].turns:
            reply = tokenizer.decode(list(turn.completion_tokens))
            if reply.startswith("go to "):
                target = NAME.search(reply)
                assert target is not None and target.group(0) in listed, reply
    assert differ == len(relabeled)
