"""Grammar compilation and derivation against TextWorld's own `ContextSensitiveGrammar`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

from agentrl.envs.alfworld.fast import FastAlfworldEngine, FastGame, GrammarError
from agentrl.envs.alfworld.fast.derive import Context
from agentrl.envs.alfworld.fast.grammar import GrammarCache


@pytest.fixture(scope="module")
def game(tiny_game: str) -> FastGame:
    return FastAlfworldEngine().game(tiny_game)


def test_every_rule_derives_like_textworld(game: FastGame, tiny_game: str) -> None:
    """Each grammar rule, in the initial state, with each receptacle and object bound."""
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.logic import Placeholder, Variable

    grammar = json.loads(Path(tiny_game).read_text())["grammar"]
    stock = pddl_logic.GameLogic(domain="", grammar=grammar).grammar
    state = _stock_state(game)
    infos = game.entity_infos
    checked = 0
    for name in game.grammar.rules:
        for kind, ph in (("receptacle", "r"), ("object", "o")):
            for entity, info in infos.items():
                if info.type != kind:
                    continue
                mapping = {
                    Placeholder(ph, kind): Variable(entity, kind),
                    Placeholder("a", "agent"): Variable("agent1", "agent"),
                }
                variables = {p.name: infos[v.name] for p, v in mapping.items()}
                context = {
                    "state": state,
                    "facts": list(state.facts),
                    "variables": variables,
                    "mapping": mapping,
                    "entity_infos": infos,
                }
                try:
                    expected = stock.derive(f"#{name}#", context)
                except Exception as exc:  # the rule needs other variables: both must fail
                    with pytest.raises(type(exc)):
                        _fast(game, name, variables, mapping)
                    continue
                assert _fast(game, name, variables, mapping) == expected, (name, entity)
                checked += 1
    assert checked > 50


def _fast(game: FastGame, name: str, variables: dict, mapping: dict) -> str:  # type: ignore[type-arg]
    nodes = game.deriver._cache.symbols(f"#{name}#")
    return game.deriver.derive(nodes, game.initial_facts, Context(dict(variables), dict(mapping)))


def _stock_state(game: FastGame):  # type: ignore[no-untyped-def]
    from collections import Counter, defaultdict

    from textworld.logic import State

    state = State.__new__(State)
    state._logic = type("Logic", (), {"types": game.types})()
    state._facts = defaultdict(set)
    state._vars_by_name = {}
    state._vars_by_type = defaultdict(set)
    state._var_counts = Counter()
    state.add_facts(list(game.initial_facts.facts))
    return state


def test_expressions_reading_evaluator_internals_are_refused() -> None:
    cache = GrammarCache()
    with pytest.raises(GrammarError, match="engine='textworld'"):
        cache.symbols("{self.expression}")
    assert cache.symbols("{o.name}")  # variables are fine


def test_go_to_reads_only_static_facts(game: FastGame) -> None:
    template = game.deriver._cache.symbols(game.grammar.actions["gotolocation"].template)
    reads = game.grammar.reads(template)
    assert reads.predicates == {"receptacleatlocation"}
    assert not reads.predicates & game.fluent
    assert {("r", "receptacle"), ("lend", "location")} == reads.placeholders
    feedback = game.deriver._cache.symbols(game.grammar.actions["gotolocation"].feedback_rule)
    assert {"opened", "inreceptacle"} <= game.grammar.reads(feedback).predicates
