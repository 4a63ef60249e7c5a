"""Text derivation with TextWorld's grammar semantics, without re-parsing or deep copies.

Stock TextWorld derives a text by re-parsing the start string with TatSu, deep-copying every
symbol and its context (variables hold `EntityInfo` objects) at every expansion, and evaluating
every rule condition of a nonterminal before keeping the first that holds. Contexts are never
mutated after creation, so sharing them is safe; conditions have no side effects, so stopping
at the first that holds gives the same rule. Queries run on TextWorld's own `State`, so their
matches come in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrl.envs.alfworld.fast.facts import FactState
from agentrl.envs.alfworld.fast.grammar import (
    CompiledGrammar,
    Conditional,
    EvalNode,
    GrammarCache,
    GrammarError,
    ListNode,
    Node,
    Nonterminal,
    Terminal,
    eval_globals,
)

__all__ = ["Context", "Deriver"]


class Context:
    """Variables (name -> EntityInfo) and placeholder mapping of one derivation step."""

    __slots__ = ("mapping", "variables")

    def __init__(self, variables: dict[str, Any], mapping: dict[Any, Any]) -> None:
        self.variables = variables
        self.mapping = mapping


_LIST_EMPTY = Nonterminal("list_empty")
_LIST_SEPARATOR = Nonterminal("list_separator")
_LIST_LAST_SEPARATOR = Nonterminal("list_last_separator")


class Deriver:
    """Derives texts of one game's grammar against a fact state."""

    def __init__(
        self, grammar: CompiledGrammar, cache: GrammarCache, entity_infos: Mapping[str, Any]
    ) -> None:
        self._grammar = grammar
        self._cache = cache
        self._infos = entity_infos
        self._globals = eval_globals()

    def derive(self, nodes: tuple[Node, ...], facts: FactState, context: Context) -> str:
        """The text of `nodes` in the state `facts` (TextWorld's `ContextSensitiveGrammar`)."""
        stack: list[tuple[Node, Context]] = [(node, context) for node in reversed(nodes)]
        out: list[str] = []
        while stack:
            node, ctx = stack.pop()
            if isinstance(node, Terminal):
                out.append(node.text)
            elif isinstance(node, Nonterminal):
                rhs = self._choose(node.name, facts, ctx)
                stack.extend((sym, ctx) for sym in reversed(rhs))
            elif isinstance(node, Conditional):
                contexts = self._query(node.given, facts, ctx) if node.given else [ctx]
                stack.extend((node.expression, c) for c in reversed(contexts))
            elif isinstance(node, EvalNode):
                out.append(str(eval(node.code, self._globals, ctx.variables)))
            else:
                items = self._list_items(node, facts, ctx)
                stack.extend(reversed(items))
        return "".join(out)

    def _choose(self, name: str, facts: FactState, ctx: Context) -> tuple[Node, ...]:
        rules = self._grammar.rules.get(name)
        if not rules:
            raise GrammarError(f"Can't find symbol '#{name}#' in the set of production rules.")
        for rule in rules:
            if not rule.condition:
                return rule.rhs
            if facts.any_assignment(self._cache.query(rule.condition), ctx.mapping):
                return rule.rhs
        raise GrammarError(f"no rule of '#{name}#' applies in this state")

    def _query(self, given: str, facts: FactState, ctx: Context) -> list[Context]:
        contexts = []
        infos = self._infos
        for found in facts.all_assignments(self._cache.query(given), ctx.mapping):
            variables = dict(ctx.variables)
            variables.update({ph.name: infos[var.name] for ph, var in found.items()})
            mapping = dict(ctx.mapping)
            mapping.update(found)
            contexts.append(Context(variables, mapping))
        return contexts

    def _list_items(
        self, node: ListNode, facts: FactState, ctx: Context
    ) -> list[tuple[Node, Context]]:
        inner = node.inner
        items: list[tuple[Node, Context]]
        if isinstance(inner, Conditional):
            contexts = self._query(inner.given, facts, ctx) if inner.given else [ctx]
            items = [(inner.expression, c) for c in contexts]
        elif isinstance(inner, EvalNode):
            value = eval(inner.code, self._globals, ctx.variables)
            items = [(Terminal(str(value)), ctx)]
        elif isinstance(inner, ListNode):
            items = self._list_items(inner, facts, ctx)
        else:
            raise GrammarError(f"a list cannot hold {inner!r}")
        if not items:
            return [(_LIST_EMPTY, ctx)]
        if len(items) == 1:
            return items
        joined: list[tuple[Node, Context]] = [items[0]]
        for item in items[1:-1]:
            joined.append((_LIST_SEPARATOR, ctx))
            joined.append(item)
        joined.append((_LIST_LAST_SEPARATOR, ctx))
        joined.append(items[-1])
        return joined
