"""Engine interface: state keys and the engine registry."""

from __future__ import annotations

import pytest

from agentrl.envs.alfworld.engine import ENGINES, engine_loader, engine_target, state_key


def test_state_key_is_order_free_and_ignores_bookkeeping() -> None:
    facts = ["atlocation(agent1, loc_1)", "inreceptacle(mug_1, desk_1)", "opened(drawer_1)"]
    key = state_key(facts)
    assert key == state_key(reversed(facts)) == state_key([*facts, facts[0]])
    assert key == state_key([*facts, "checked(desk_1)", "examined(loc_1)"])
    assert key == state_key([*facts, "new-axiom@3(agent1)"])
    assert key != state_key(facts[:-1])
    assert key != state_key(["atlocation(agent1, loc_2)", *facts[1:]])
    assert len(key) == 16


def test_engine_registry() -> None:
    assert engine_target("textworld") == ENGINES["textworld"]
    assert callable(engine_loader("textworld"))
    assert engine_loader(ENGINES["textworld"]) is engine_loader("textworld")
    with pytest.raises(ValueError, match="unknown ALFWorld engine 'warp'"):
        engine_target("warp")


def test_textworld_engine_reports_facts_as_keys(alfworld_games) -> None:
    from agentrl.envs.alfworld.engine import TextWorldEngine

    game = min(alfworld_games.games, key=lambda g: g.path.stat().st_size)
    a, b = TextWorldEngine(str(game.path)), TextWorldEngine(str(game.path))
    try:
        first_a, first_b = a.reset(), b.reset()
        assert first_a == first_b and first_a.gamefile == str(game.path)
        assert "help" in first_a.admissible_commands and not first_a.won
        go = next(c for c in first_a.admissible_commands if c.startswith("go to "))
        moved = a.step(go)
        assert moved.state_key != first_a.state_key
        assert b.step("examine nothing at all").state_key == first_b.state_key
        assert b.step(go).state_key == moved.state_key  # same state on another branch
    finally:
        a.close()
        b.close()
