"""The exploring expert: reads only the goal and the observations, and wins generated games."""

from __future__ import annotations

from typing import Any

import pytest

from agentrl.envs.alfworld.explorer import (
    ExplorerNoise,
    Goal,
    SearchOrder,
    explorer_action,
    explorer_policy,
    observations_in,
    parse_goal,
)
from agentrl.envs.alfworld.tools import alfworld_plain_protocol, alfworld_tool_protocol
from agentrl.types import TurnStatus

ROOM = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
    "around you, you see a cabinet 2, a cabinet 1, a countertop 1, a fridge 1, a microwave 1, "
    "a sinkbasin 1, and a shelf 1.\n\nYour task is to: {goal}."
)


@pytest.mark.parametrize(
    ("sentence", "goal"),
    [
        ("put a mug in coffeemachine", Goal("pick_and_place_simple", "mug", "coffeemachine")),
        ("put some pen on garbagecan", Goal("pick_and_place_simple", "pen", "garbagecan")),
        ("look at book under the desklamp", Goal("look_at_obj_in_light", "book", lamp="desklamp")),
        ("examine the cd with the desklamp", Goal("look_at_obj_in_light", "cd", lamp="desklamp")),
        ("put a clean mug in shelf", Goal("pick_clean_then_place_in_recep", "mug", "shelf")),
        (
            "clean some soapbar and put it in drawer",
            Goal("pick_clean_then_place_in_recep", "soapbar", "drawer"),
        ),
        ("put a hot apple in fridge", Goal("pick_heat_then_place_in_recep", "apple", "fridge")),
        (
            "heat some egg and put it in countertop",
            Goal("pick_heat_then_place_in_recep", "egg", "countertop"),
        ),
        ("put a cool pan in cabinet", Goal("pick_cool_then_place_in_recep", "pan", "cabinet")),
        (
            "cool some potato and put it in countertop",
            Goal("pick_cool_then_place_in_recep", "potato", "countertop"),
        ),
        ("put two pen in drawer", Goal("pick_two_obj_and_place", "pen", "drawer")),
        ("find two cd and put them in safe", Goal("pick_two_obj_and_place", "cd", "safe")),
    ],
)
def test_every_goal_template_parses(sentence: str, goal: Goal) -> None:
    assert parse_goal(ROOM.format(goal=sentence)) == goal
    assert parse_goal(sentence + ".") == goal


def test_an_unknown_goal_is_none() -> None:
    assert parse_goal("Your task is to: dance with the ceiling.") is None


def _play(
    goal_text: str,
    answers: dict[str, str | list[str]],
    limit: int = 30,
    order: SearchOrder = "surfaces_first",
    noise: ExplorerNoise | None = None,
) -> list[str]:
    """Run the explorer against a scripted world: `answers` maps a command to its observation
    (a list: one per time the command is given); "DONE" ends the episode."""
    first = ROOM.format(goal=goal_text)
    goal = parse_goal(first)
    assert goal is not None
    observations, actions = [first], []
    for _ in range(limit):
        action = explorer_action(goal, observations, order, noise)
        actions.append(action)
        answer = answers.get(action, "Nothing happens.")
        text = answer.pop(0) if isinstance(answer, list) else answer
        if action == "look" or text == "DONE":
            break
        observations.append(text)
    return actions


def test_surfaces_first_opens_closed_furniture_and_puts_the_object() -> None:
    answers = {
        "go to countertop 1": "You arrive at countertop 1. On the countertop 1, you see a knife 1.",
        "go to sinkbasin 1": "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
        "go to cabinet 2": "You arrive at cabinet 2. The cabinet 2 is closed.",
        "open cabinet 2": "You open the cabinet 2. The cabinet 2 is open. In it, you see a mug 1.",
        "take mug 1 from cabinet 2": "You pick up the mug 1 from the cabinet 2.",
        "clean mug 1 with sinkbasin 1": "You clean the mug 1 using the sinkbasin 1.",
        "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see nothing.",
        "move mug 1 to shelf 1": "DONE",
    }
    assert _play("put a clean mug in shelf", answers) == [
        "go to countertop 1",  # surfaces first (the goal's shelf last), in the listed order
        "go to sinkbasin 1",
        "go to cabinet 2",
        "open cabinet 2",
        "take mug 1 from cabinet 2",
        "go to sinkbasin 1",
        "clean mug 1 with sinkbasin 1",
        "go to shelf 1",
        "move mug 1 to shelf 1",
    ]


LISTED_WORLD = {
    "go to cabinet 2": "You arrive at cabinet 2. The cabinet 2 is closed.",
    "open cabinet 2": "You open the cabinet 2. The cabinet 2 is open. In it, you see nothing.",
    "examine cabinet 1": "The cabinet 1 is closed.",
    "open cabinet 1": "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing.",
    "go to countertop 1": "You arrive at countertop 1. On the countertop 1, you see a knife 1.",
    "go to fridge 1": "You arrive at fridge 1. The fridge 1 is closed.",
    "open fridge 1": "You open the fridge 1. The fridge 1 is open. In it, you see a mug 1.",
    "take mug 1 from fridge 1": "You pick up the mug 1 from the fridge 1.",
    "go to microwave 1": "You arrive at microwave 1. The microwave 1 is closed.",
    "go to sinkbasin 1": "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
    "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see nothing.",
    "move mug 1 to shelf 1": "DONE",
}


def test_the_listed_order_searches_the_room_as_it_is_listed() -> None:
    """`order="listed"`: cabinets before the countertop, the goal's shelf in its place."""
    answers = LISTED_WORLD
    listed = _play("put a mug in shelf", dict(answers), order="listed")
    assert listed == [
        "go to cabinet 2",
        "open cabinet 2",
        "go to cabinet 1",  # shares cabinet 2's place: "Nothing happens.", then examined
        "examine cabinet 1",
        "open cabinet 1",
        "go to countertop 1",
        "go to fridge 1",
        "open fridge 1",
        "take mug 1 from fridge 1",
        "go to shelf 1",
        "move mug 1 to shelf 1",
    ]
    assert _play("put a mug in shelf", dict(answers))[0] == "go to countertop 1"


def test_a_receptacle_sharing_the_place_is_examined() -> None:
    """`go to cabinet 1` from cabinet 2 (same place) fails: the explorer looks at it there."""
    answers = {
        "go to countertop 1": "You arrive at countertop 1. On the countertop 1, you see nothing.",
        "go to sinkbasin 1": "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
        "go to cabinet 2": "You arrive at cabinet 2. The cabinet 2 is closed.",
        "open cabinet 2": "You open the cabinet 2. The cabinet 2 is open. In it, you see nothing.",
        "examine cabinet 1": "The cabinet 1 is closed.",
        "open cabinet 1": "You open the cabinet 1. The cabinet 1 is open. In it, you see a cup 1.",
        "take cup 1 from cabinet 1": "You pick up the cup 1 from the cabinet 1.",
        "go to microwave 1": "You arrive at microwave 1. The microwave 1 is closed.",
        "heat cup 1 with microwave 1": "You heat the cup 1 using the microwave 1.",
        "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see nothing.",
        "move cup 1 to shelf 1": "DONE",
    }
    actions = _play("heat some cup and put it in shelf", answers)
    assert actions[4:8] == [
        "go to cabinet 1",
        "examine cabinet 1",
        "open cabinet 1",
        "take cup 1 from cabinet 1",
    ]
    assert actions[-3:] == ["heat cup 1 with microwave 1", "go to shelf 1", "move cup 1 to shelf 1"]


def test_with_noise_the_explorer_plays_its_mistakes_and_still_wins() -> None:
    """Each noisy turn (`ExplorerNoise.noisy`) plays a mistake, every other turn the
    explorer's own move from the state the mistakes left, and every episode still ends with
    the object put; rate 0 is the plain explorer."""
    first = ROOM.format(goal="put a mug in shelf")
    plain = _play("put a mug in shelf", dict(LISTED_WORLD), order="listed")
    mistakes = 0
    for seed in range(12):
        noise = ExplorerNoise(0.3, seed)
        actions = _play("put a mug in shelf", dict(LISTED_WORLD), 60, "listed", noise)
        assert actions[-1] == "move mug 1 to shelf 1", (seed, actions)
        noisy = [t for t in range(len(actions)) if noise.noisy(first, t)]
        assert all(actions[t].startswith(("go to ", "examine ", "take mug ")) for t in noisy)
        assert len(actions) >= len(plain)
        mistakes += len(noisy)
        off = ExplorerNoise(0.0, seed)
        assert _play("put a mug in shelf", dict(LISTED_WORLD), order="listed", noise=off) == plain
    assert mistakes >= 12  # about 0.3 of the turns of 12 episodes
    with pytest.raises(ValueError, match=r"ExplorerNoise.rate must be in \[0, 1\)"):
        ExplorerNoise(1.0)


class _ExamineTheFridgeAtTurnOne(ExplorerNoise):
    def noisy(self, first_observation: str, turn: int) -> bool:
        return turn == 1

    def command(self, *args: object, **kwargs: object) -> str:
        return "examine fridge 1"


def test_an_impossible_examine_elsewhere_does_not_count_as_searched() -> None:
    """`examine fridge 1` from the countertop answers "Nothing happens.": the explorer goes
    on to the next surface and still searches the fridge, where the mug is (only an examine
    where the agent is tells it a place is empty)."""
    noise = _ExamineTheFridgeAtTurnOne(0.5)
    actions = _play("put a mug in shelf", dict(LISTED_WORLD), 40, noise=noise)
    assert actions[:3] == ["go to countertop 1", "examine fridge 1", "go to sinkbasin 1"]
    assert actions[-4:] == [
        "open fridge 1",
        "take mug 1 from fridge 1",
        "go to shelf 1",
        "move mug 1 to shelf 1",
    ]


def test_two_objects_and_a_lamp_seen_on_the_way_are_remembered() -> None:
    two: dict[str, str | list[str]] = {
        "go to countertop 1": (
            "You arrive at countertop 1. On the countertop 1, you see a pen 2, and a pen 1."
        ),
        "take pen 2 from countertop 1": "You pick up the pen 2 from the countertop 1.",
        "go to cabinet 2": [
            "You arrive at cabinet 2. The cabinet 2 is closed.",
            "You arrive at cabinet 2. The cabinet 2 is open. In it, you see a pen 2.",
        ],
        "open cabinet 2": "You open the cabinet 2. The cabinet 2 is open. In it, you see nothing.",
        "move pen 2 to cabinet 2": "You move the pen 2 to the cabinet 2.",
        "take pen 1 from countertop 1": "You pick up the pen 1 from the countertop 1.",
        "move pen 1 to cabinet 2": "DONE",
    }
    assert _play("put two pen in cabinet", two) == [
        "go to countertop 1",
        "take pen 2 from countertop 1",
        "go to cabinet 2",
        "open cabinet 2",
        "move pen 2 to cabinet 2",
        "go to countertop 1",
        "take pen 1 from countertop 1",
        "go to cabinet 2",
        "move pen 1 to cabinet 2",
    ]
    lamp = {
        "go to countertop 1": (
            "You arrive at countertop 1. On the countertop 1, you see a desklamp 1."
        ),
        "go to sinkbasin 1": "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
        "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see a book 1.",
        "take book 1 from shelf 1": "You pick up the book 1 from the shelf 1.",
        "use desklamp 1": "DONE",
    }
    assert _play("look at book under the desklamp", lamp)[-3:] == [
        "take book 1 from shelf 1",
        "go to countertop 1",
        "use desklamp 1",
    ]


def test_the_policy_reads_observations_out_of_a_rendered_conversation() -> None:
    protocol = alfworld_tool_protocol(include_admissible=True)
    text = (
        "<|im_start|>system\nrules<|im_end|>\n<|im_start|>user\nStep 0 of 50.\nObservation:\n"
        + ROOM.format(goal="put a mug in shelf")
        + "\nAvailable actions (copy one exactly):\ngo to cabinet 1\nlook<|im_end|>\n"
        "<|im_start|>assistant\n" + protocol.call_text("go to countertop 1") + "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nStatus: executed 'go to countertop 1'.\nStep 1 of 50."
        "\nObservation:\nYou arrive at countertop 1. On the countertop 1, you see a mug 3.\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    observations = observations_in(text)
    assert len(observations) == 2 and observations[0].endswith("put a mug in shelf.")
    assert observations[1] == "You arrive at countertop 1. On the countertop 1, you see a mug 3."
    assert explorer_policy()(text) == "take mug 3 from countertop 1"
    assert explorer_policy(protocol.call_text)(text) == protocol.call_text(
        "take mug 3 from countertop 1"
    )


@pytest.mark.parametrize(("plain", "order"), [(False, "surfaces_first"), (True, "listed")])
async def test_the_explorer_wins_generated_games(
    alfworld_games: Any, plain: bool, order: SearchOrder
) -> None:
    """Through the rollout engine and the tool protocol (no action lists) on every game of the
    session's generated set (all six task types, train and unseen floor plans); and through
    the plain protocol (the command alone, the goal restated in every tool message) searching
    in the listed order."""
    pytest.importorskip("transformers")
    from agentrl.envs.alfworld import AlfworldEnvOptions, EnvWorkerPool, alfworld_group_factory
    from agentrl.learning_tokenizer import bpe_tokenizer
    from tests.helpers.explorer_helpers import explorer_episodes

    protocol = (
        alfworld_plain_protocol(restate_task=True)
        if plain
        else alfworld_tool_protocol(include_admissible=False)
    )
    tokenizer = bpe_tokenizer([], 0)
    factory = alfworld_group_factory(AlfworldEnvOptions(max_steps=50), EnvWorkerPool(2))
    tasks = [g.to_task() for g in alfworld_games.games]
    try:
        groups = await explorer_episodes(tasks, factory, protocol, order, tokenizer)
    finally:
        await factory.close()
    won = {g.task.task_id: g.trajectories[0].won for g in groups}
    assert {g.task.task_type for g in groups} == {
        "pick_and_place_simple",
        "look_at_obj_in_light",
        "pick_clean_then_place_in_recep",
        "pick_heat_then_place_in_recep",
        "pick_cool_then_place_in_recep",
        "pick_two_obj_and_place",
    }
    assert sum(won.values()) >= len(won) - 1, won
    if plain:  # the engine hands the protocol each group's task
        for g in groups:
            turn = g.trajectories[0].turns[1]
            assert f"Task: {g.task.description}" in tokenizer.decode(list(turn.prompt_tokens))
    statuses = {turn.status for g in groups for turn in g.trajectories[0].turns}
    assert TurnStatus.INVALID_FORMAT not in statuses  # every call is written in the protocol's form


async def test_local_lists_leave_the_moves_out_and_the_explorer_plays_the_same(
    alfworld_games: Any,
) -> None:
    """`alfworld_plain_protocol(list_moves=False)` (the recipe's "plain-local"): on real
    generated games the lists never carry a `go to` command, yet show the commands that act
    where the agent stands; the explorer plays reply for reply what it plays under the full
    lists (it reads the observations, which name every receptacle), and every prompt is
    shorter."""
    pytest.importorskip("transformers")
    from agentrl.envs.alfworld import AlfworldEnvOptions, EnvWorkerPool, alfworld_group_factory
    from agentrl.learning_tokenizer import bpe_tokenizer
    from tests.helpers.explorer_helpers import explorer_episodes

    tokenizer = bpe_tokenizer([], 0)
    heading = "Available actions (copy one exactly):"
    tasks = [g.to_task() for g in alfworld_games.games][:6]
    played = {}
    for list_moves in (True, False):
        protocol = alfworld_plain_protocol(True, include_admissible=True, list_moves=list_moves)
        factory = alfworld_group_factory(AlfworldEnvOptions(max_steps=50), EnvWorkerPool(2))
        try:
            groups = await explorer_episodes(tasks, factory, protocol, "listed", tokenizer)
        finally:
            await factory.close()
        played[list_moves] = {g.task.task_id: g.trajectories[0] for g in groups}
    full, local = played[True], played[False]
    assert sum(t.won for t in local.values()) >= len(local) - 1
    listed_lines: dict[bool, list[str]] = {True: [], False: []}
    for list_moves, episodes in played.items():
        for episode in episodes.values():
            text = tokenizer.decode(list(episode.turns[-1].prompt_tokens))
            for block in text.split(heading)[1:]:
                listed_lines[list_moves] += block.split("Observation:")[0].strip().splitlines()
    assert any(line.startswith("go to ") for line in listed_lines[True])
    assert not any(line.startswith("go to ") for line in listed_lines[False])
    assert any(line.startswith(("take ", "open ")) for line in listed_lines[False])
    for task_id, episode in local.items():
        replies = [tokenizer.decode(list(turn.completion_tokens)) for turn in episode.turns]
        same = [tokenizer.decode(list(turn.completion_tokens)) for turn in full[task_id].turns]
        assert replies == same, task_id
        assert any(reply.startswith("go to ") for reply in replies)
        for short, long in zip(episode.turns, full[task_id].turns, strict=True):
            assert len(short.prompt_tokens) < len(long.prompt_tokens)
