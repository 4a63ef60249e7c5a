"""`FactState` answers queries exactly as TextWorld's `State.all_assignments` does."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from hypothesis import given, settings
from hypothesis import strategies as st
from textworld.logic import Placeholder, Proposition, State, Variable

from agentrl.envs.alfworld.fast import FastAlfworldEngine, FastGame
from agentrl.envs.alfworld.fast.facts import FactState

# (predicate, argument types) of the facts drawn, and the variables of each type
_PREDICATES = [
    ("atlocation", ("agent", "location")),
    ("receptacleatlocation", ("receptacle", "location")),
    ("objectatlocation", ("object", "location")),
    ("inreceptacle", ("object", "receptacle")),
    ("not_inreceptacle", ("object", "receptacle")),
    ("openable", ("receptacle",)),
    ("opened", ("receptacle",)),
    ("holds", ("agent", "object")),
    ("checked", ("object",)),
    ("checked", ("receptacle",)),
]
_NAMES = {
    "agent": ["agent1"],
    "location": ["loc_a", "loc_b", "loc_c"],
    "receptacle": ["cabinet_1", "cabinet_2", "fridge_1"],
    "object": ["apple_1", "apple_2", "mug_1"],
}
_QUERIES = [
    "atlocation(a:agent, l:location) & receptacleatlocation(r:receptacle, l:location)",
    "inreceptacle(o:object, r:receptacle)",
    "openable(r:receptacle) & opened(r:receptacle)",
    "atlocation(a:agent, l:location) & objectatlocation(o:object, l:location) & "
    "receptacleatlocation(r:receptacle, l:location) & not_inreceptacle(o:object, r:receptacle)",
    "holds(a:agent, o:object)",
    "receptacleatlocation(r:receptacle, lend:location)",
    "checked(x:object)",
]


@pytest.fixture(scope="module")
def game(tiny_game: str) -> FastGame:
    return FastAlfworldEngine().game(tiny_game)


def _all_facts() -> list[Any]:
    facts = []
    for name, types in _PREDICATES:
        pools: list[list[tuple[str, str]]] = [[]]
        for t in types:
            pools = [[*p, (n, t)] for p in pools for n in _NAMES[t]]
        facts += [Proposition(name, [Variable(n, t) for n, t in args]) for args in pools]
    return facts


ALL_FACTS = _all_facts()


def _stock_state(types: Any, facts: list[Any]) -> Any:
    state = State.__new__(State)  # as TextWorld's PddlState builds it (no GameLogic needed)
    state._logic = type("Logic", (), {"types": types})()
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state.add_facts(facts)
    return state


@settings(max_examples=60, deadline=None)
@given(
    chosen=st.lists(st.sampled_from(range(len(ALL_FACTS))), max_size=40),
    query=st.sampled_from(_QUERIES),
    bind=st.lists(st.sampled_from(["a", "l", "r", "o"]), max_size=2, unique=True),
    seed=st.integers(0, 10),
)
def test_queries_match_textworld(
    game: FastGame, chosen: list[int], query: str, bind: list[str], seed: int
) -> None:
    facts = [ALL_FACTS[i] for i in chosen]
    types = {"a": "agent", "l": "location", "r": "receptacle", "o": "object"}
    mapping = {
        Placeholder(ph, types[ph]): Variable(
            _NAMES[types[ph]][seed % len(_NAMES[types[ph]])], types[ph]
        )
        for ph in bind
    }
    rule = game.deriver._cache.query(query)
    ours = FactState(game.types)
    ours.add_facts(facts)
    expected = list(_stock_state(game.types, facts).all_assignments(rule, mapping))
    assert ours.all_assignments(rule, mapping) == expected
    assert ours.all_assignments(rule, mapping, limit=2) == expected[:2]
    assert ours.any_assignment(rule, mapping) == bool(expected)


def test_copies_do_not_share_changes(game: FastGame) -> None:
    base = FactState(game.types)
    base.add_facts(ALL_FACTS[:10])
    twin = base.copy()
    twin.remove_fact(ALL_FACTS[0])
    twin.add_fact(ALL_FACTS[20])
    assert ALL_FACTS[0] in set(base.facts) and ALL_FACTS[20] not in set(base.facts)
    assert ALL_FACTS[0] not in set(twin.facts) and ALL_FACTS[20] in set(twin.facts)
    base.add_fact(ALL_FACTS[30])
    assert ALL_FACTS[30] not in set(twin.facts)
