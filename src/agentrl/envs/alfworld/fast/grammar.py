"""ALFWorld's text grammar, parsed once and shared across games.

A `.tw-pddl` game carries a TextWorld "logic document": one action per PDDL action (a command
template and a feedback rule) and a context-sensitive grammar (rules with optional conditions
on the game facts). Stock TextWorld re-parses every template with TatSu each time it derives a
text; here each distinct string is parsed once (with TextWorld's own parser, so the symbol trees
are the same) and turned into small immutable nodes. `GrammarCache` holds those parses; it is
the place to share work between games (their grammars differ only in the task sentence).
"""

from __future__ import annotations

import ast
import builtins
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Any

from agentrl._optional import require

__all__ = [
    "ActionText",
    "CompiledGrammar",
    "Conditional",
    "EvalNode",
    "GrammarCache",
    "GrammarError",
    "ListNode",
    "Node",
    "Nonterminal",
    "ProductionRule",
    "Reads",
    "Terminal",
]


class GrammarError(ValueError):
    """The game's grammar uses something the fast engine does not reproduce."""


@dataclass(frozen=True, slots=True)
class Terminal:
    """Literal text."""

    text: str


@dataclass(frozen=True, slots=True)
class Nonterminal:
    """`#name#`: replaced by the first rule of that name whose condition holds."""

    name: str


@dataclass(frozen=True, slots=True)
class EvalNode:
    """A Python expression over the context's variables (e.g. `o.name`)."""

    source: str
    code: CodeType
    names: frozenset[str]
    """The names the expression reads."""


@dataclass(frozen=True, slots=True)
class Conditional:
    """`{expression | query}`: the expression once per match of the query (once if none)."""

    expression: Node
    given: str | None


@dataclass(frozen=True, slots=True)
class ListNode:
    """`[...]`: the inner symbol's expansions joined as an English list."""

    inner: Node


Node = Terminal | Nonterminal | EvalNode | Conditional | ListNode


@dataclass(frozen=True, slots=True)
class ProductionRule:
    """One alternative of a grammar rule."""

    condition: str
    rhs: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class ActionText:
    """The text side of one PDDL action: its command template and feedback rule."""

    name: str
    template: str
    feedback_rule: str


# Names an expression may not use: in stock TextWorld they would resolve to the evaluator's own
# locals or module globals, which the fast engine does not reproduce.
_FORBIDDEN_NAMES = frozenset({"self", "context", "deepcopy", "copy_context", "query"})
_EVAL_GLOBALS: dict[str, Any] = {"__builtins__": builtins}


def eval_globals() -> dict[str, Any]:
    """Globals used to evaluate grammar expressions (builtins only)."""
    return _EVAL_GLOBALS


class CompiledGrammar:
    """The actions and production rules of one game's logic document."""

    def __init__(
        self,
        actions: Mapping[str, ActionText],
        rules: Mapping[str, tuple[ProductionRule, ...]],
        cache: GrammarCache,
    ) -> None:
        self.actions = dict(actions)
        self.rules = dict(rules)
        self._cache = cache

    def reads(self, nodes: Iterable[Node]) -> Reads:
        """What any derivation of `nodes` may read (through every rule it may expand)."""
        predicates: set[str] = set()
        names: set[str] = set()
        placeholders: set[tuple[str, str]] = set()
        seen: set[str] = set()
        todo = list(nodes)

        def query(expression: str) -> None:
            predicates.update(self._cache.predicates(expression))
            placeholders.update(self._cache.placeholders(expression))

        while todo:
            node = todo.pop()
            if isinstance(node, Nonterminal):
                if node.name in seen:
                    continue
                seen.add(node.name)
                for rule in self.rules.get(node.name, ()):
                    if rule.condition:
                        query(rule.condition)
                    todo.extend(rule.rhs)
            elif isinstance(node, Conditional):
                if node.given:
                    query(node.given)
                todo.append(node.expression)
            elif isinstance(node, ListNode):
                todo.append(node.inner)
                todo.extend(
                    Nonterminal(n) for n in ("list_empty", "list_separator", "list_last_separator")
                )
            elif isinstance(node, EvalNode):
                names.update(node.names)
        return Reads(frozenset(predicates), frozenset(names), frozenset(placeholders))


@dataclass(frozen=True, slots=True)
class Reads:
    """What a derivation may read: query predicates, expression names, query placeholders."""

    predicates: frozenset[str]
    names: frozenset[str]
    placeholders: frozenset[tuple[str, str]]
    """(name, type) of every placeholder a query or condition mentions."""


class GrammarCache:
    """Memoized parses of grammar strings, queries and logic documents (thread-safe)."""

    def __init__(self, max_documents: int = 64) -> None:
        self._textgen = require("textworld.envs.pddl.textgen", "alfworld", "the ALFWorld engine")
        self._pddl_logic = require("textworld.envs.pddl.logic", "alfworld", "the ALFWorld engine")
        self._logic = require("textworld.logic", "alfworld", "the ALFWorld engine")
        self._model = require("textworld.envs.pddl.logic.model", "alfworld", "the ALFWorld engine")
        self._lock = threading.RLock()
        self._symbols: dict[str, tuple[Node, ...]] = {}
        self._queries: dict[str, Any] = {}
        self._predicates: dict[str, frozenset[str]] = {}
        self._documents: dict[str, CompiledGrammar] = {}
        self._max_documents = max_documents

    def symbols(self, text: str) -> tuple[Node, ...]:
        """The nodes of a symbol string (a rule's right-hand side, a template, `#intro#`)."""
        nodes = self._symbols.get(text)
        if nodes is None:
            with self._lock:
                parsed = self._textgen._parse_and_convert(text, rule_name="symbols")
                nodes = tuple(self._convert(symbol, text) for symbol in parsed)
                self._symbols[text] = nodes
        return nodes

    def query(self, expression: str) -> Any:
        """TextWorld's conjunctive-query rule for `expression` (read-only, shared)."""
        rule = self._queries.get(expression)
        if rule is None:
            with self._lock:
                rule = self._logic.Rule.parse_conjunctive_query(expression)
                self._queries[expression] = rule
        return rule

    def placeholders(self, expression: str) -> frozenset[tuple[str, str]]:
        """(name, type) of the placeholders a query expression mentions."""
        rule = self.query(expression)
        return frozenset(
            (ph.name, ph.type) for pred in rule.preconditions for ph in pred.parameters
        )

    def predicates(self, expression: str) -> frozenset[str]:
        """Names of the predicates a query expression mentions."""
        names = self._predicates.get(expression)
        if names is None:
            names = frozenset(pred.name for pred in self.query(expression).preconditions)
            self._predicates[expression] = names
        return names

    def document(self, text: str) -> CompiledGrammar:
        """Compile a game's logic document (the `grammar` field of a `.tw-pddl` file)."""
        compiled = self._documents.get(text)
        if compiled is not None:
            return compiled
        with self._lock:
            model = self._pddl_logic._PARSER.parse(text, rule_name="pddlStart")
            converter = self._pddl_logic._ModelConverter()
            model_types = self._model
            actions: dict[str, ActionText] = {}
            grammar: dict[str, Any] = {}
            for part in model.parts:
                if isinstance(part, model_types.ActionTypeNode):
                    action = converter.walk(part)
                    actions[action.name.lower()] = ActionText(
                        action.name, action.template, action.feedback_rule
                    )
                    lines = action.grammar.split("\n")
                    data = "\n".join(ln for ln in lines if not ln.lstrip().startswith("#"))
                    grammar.update(json.loads(data))
                elif isinstance(part, model_types.ActionGrammarNode):
                    grammar.update(json.loads(converter._unescape_block(part.code)))
            grammar = json.loads(json.dumps(grammar))  # what stock TextWorld parses
            rules = {
                name: tuple(
                    ProductionRule(str(alt.get("condition", "")), self.symbols(alt["rhs"]))
                    for alt in alternatives
                )
                for name, alternatives in grammar.items()
            }
            compiled = CompiledGrammar(actions, rules, self)
            if len(self._documents) >= self._max_documents:
                self._documents.pop(next(iter(self._documents)))
            self._documents[text] = compiled
        return compiled

    def _convert(self, symbol: Any, where: str) -> Node:
        tg = self._textgen
        if isinstance(symbol, tg.TerminalSymbol):
            return Terminal(str(symbol.symbol))
        if isinstance(symbol, tg.NonterminalSymbol):
            return Nonterminal(str(symbol.symbol))
        if isinstance(symbol, tg.ConditionalSymbol):
            given = symbol.given if symbol.given else None
            return Conditional(self._convert(symbol.expression, where), given)
        if isinstance(symbol, tg.EvalSymbol):
            return _compile_expression(str(symbol.expression), where)
        if isinstance(symbol, tg.ListSymbol):
            return ListNode(self._convert(symbol.symbol, where))
        raise GrammarError(f"unknown grammar symbol {symbol!r} in {where!r}")


def _compile_expression(source: str, where: str) -> EvalNode:
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise GrammarError(f"invalid grammar expression {source!r} in {where!r}: {exc}") from exc
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    bad = sorted(names & _FORBIDDEN_NAMES)
    if bad:
        raise GrammarError(
            f"grammar expression {source!r} in {where!r} uses {bad}, which only stock TextWorld "
            "evaluates; use engine='textworld' for this game"
        )
    return EvalNode(source, compile(tree, "<alfworld grammar>", "eval"), frozenset(names))
