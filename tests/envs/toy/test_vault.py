"""The vault task: the code is told once; a random valid policy wins 1 / buttons; one env, both
protocols (plain commands over its listed actions, function tools)."""

from __future__ import annotations

import itertools

import pytest

from agentrl.config import CommonConfig
from agentrl.envs.toy import VaultEnv, vault_group_factory, vault_task, vault_tasks
from agentrl.envs.toy.spec import FETCH_SPEC, VAULT_SPEC, vault_spec
from agentrl.envs.toy.vault import vault_random_success
from agentrl.testing.env_check import check_env_group
from agentrl.tools import FunctionTools
from agentrl.types import ToolCall


async def test_contract_with_commands_and_with_calls() -> None:
    task = vault_tasks(1, seed=5)[0]
    factory = vault_group_factory()
    await check_env_group(lambda: factory(task, 3), probe_action="walk north")
    await check_env_group(
        lambda: factory(task, 3),
        choose_action=lambda step, rng: (VaultEnv(task).command_call(step.admissible_actions[0]),),
        invalid_action=(ToolCall("press", {"button": "purple"}),),  # no such button
        probe_action=(ToolCall("walk", {"direction": "up"}),),
    )


async def test_only_the_first_message_names_the_code_and_one_button_wins() -> None:
    task = vault_tasks(1, seed=11, buttons=4, rooms=2)[0]
    game = vault_task(11, buttons=4, rooms=2)
    assert game.code not in task.description
    group = vault_group_factory(4, 2)(task, 4)
    first = await group.reset()
    assert f"code is {game.code}" in first[0].observation
    walks = list(itertools.product(*game.paths))[:1] * 4
    seen = [first[0].observation]
    for room in range(2):
        steps = await group.step([f"walk {w[room]}" for w in walks])
        seen.extend(s.observation for s in steps)
        assert all(s.admissible and not s.done for s in steps)
    assert steps[0].admissible_actions == tuple(f"press {b}" for b in game.buttons)
    assert all(f"code is {game.code}" not in text for text in seen[1:])
    pressed = await group.step([f"press {b}" for b in game.buttons])
    assert [s.won for s in pressed] == [b == game.code for b in game.buttons]
    assert all(s.done and s.admissible_actions == () for s in pressed)
    assert vault_random_success(4) == pytest.approx(0.25)


async def test_tools_refuse_what_the_list_does_not_offer() -> None:
    task = vault_tasks(1, seed=2, rooms=1)[0]
    game = vault_task(2, rooms=1)
    group = vault_group_factory(rooms=1)(task, 2)
    await group.reset()
    wrong = next(d for d in ("north", "south", "east", "west") if d not in game.paths[0])
    steps = await group.step([f"walk {wrong}", (ToolCall("walk", {"direction": wrong}),)])
    assert not steps[0].admissible and not steps[1].admissible
    assert "no way" in steps[1].outputs[0]
    steps = await group.step([f"press {game.code}", f"walk {game.paths[0][0]}"])
    assert not steps[0].admissible and steps[1].admissible  # branch 0 is not at the vault


def test_games_are_seeded_and_sizes_checked() -> None:
    assert vault_task(3) == vault_task(3) and vault_task(3) != vault_task(4)
    assert [t.task_id for t in vault_tasks(2, seed=9)] == ["vault-9", "vault-10"]
    with pytest.raises(ValueError, match="buttons"):
        vault_tasks(1, buttons=7)
    codes = {vault_task(s).code for s in range(40)}
    assert len(codes) == 4  # every button is the code in some game


def test_specs_offer_disjoint_splits_and_both_protocols() -> None:
    config = CommonConfig.model_validate({"env": "toy", "max_episode_steps": 5})
    for spec in (FETCH_SPEC, VAULT_SPEC):
        train = spec.tasks(config, ["train"], limit_per_split=20)
        held_out = spec.tasks(config, ["valid_unseen"], limit_per_split=20)
        assert len(train) == len(held_out) == 20
        assert not {t.task_id for t in train} & {t.task_id for t in held_out}
    assert isinstance(VAULT_SPEC.tool_protocol(config), FunctionTools)
    assert [f.name for f in VAULT_SPEC.tool_protocol(config).functions] == ["walk", "press"]  # type: ignore[attr-defined]
    assert "walk 5 rooms" in vault_spec(rooms=5).summary
