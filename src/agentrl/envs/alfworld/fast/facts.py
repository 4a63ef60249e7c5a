"""The fact set a game's text is derived from, with TextWorld's query semantics.

TextWorld's `PddlState` keeps the facts of the state in a `textworld.logic.State` and answers
grammar queries with `State.all_assignments`, which sorts the matching facts of every signature
at every query. `FactState` keeps the same facts (same `Proposition` objects, grouped by
signature), shares them copy-on-write between branches, and keeps each signature's sorted order
until that signature changes, so a query walks the facts in the same order without re-sorting.
Matches are produced as TextWorld produces them: preconditions in order, the signatures of each
predicate in the type hierarchy's `multi_subtypes` order, facts in sorted order, a variable
bound to at most one placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from agentrl.envs.alfworld.fast.records import fact_text, keep_for_key

__all__ = ["FactState", "SigKey", "signature_key"]

SigKey = tuple[str, tuple[str, ...]]


def signature_key(prop: Any) -> SigKey:
    """(predicate name, argument types): the grouping TextWorld's `State` uses."""
    return (prop.name, tuple(var.type for var in prop.arguments))


def _sort_key(prop: Any) -> tuple[tuple[str, str], ...]:
    # TextWorld orders propositions by (name, arguments) and variables by (name, type); within
    # one signature the name and the types are fixed.
    return tuple((var.name, var.type) for var in prop.arguments)


class FactState:
    """A set of facts (TextWorld `Proposition`s) answering conjunctive queries."""

    __slots__ = ("_index", "_owned", "_plans", "_sets", "_sorted", "_subtypes", "_texts", "types")

    def __init__(self, types: Any) -> None:
        self.types = types
        # shared by every copy: they only depend on the type hierarchy and the queries
        self._subtypes: dict[tuple[str, tuple[str, ...]], tuple[SigKey, ...]] = {}
        self._plans: dict[tuple[int, frozenset[Any]], Any] = {}
        self._sets: dict[SigKey, set[Any]] = {}
        self._sorted: dict[SigKey, tuple[Any, ...]] = {}
        self._texts: dict[SigKey, tuple[str, ...]] = {}
        self._index: dict[SigKey, dict[tuple[int, ...], dict[tuple[Any, ...], list[Any]]]] = {}
        self._owned: set[SigKey] = set()

    def copy(self) -> FactState:
        """An independent state sharing the unchanged fact groups (copy-on-write)."""
        other = FactState.__new__(FactState)
        other.types = self.types
        other._subtypes = self._subtypes
        other._plans = self._plans
        other._sets = dict(self._sets)
        other._sorted = dict(self._sorted)
        other._texts = dict(self._texts)
        other._index = dict(self._index)
        other._owned = set()
        self._owned = set()  # the groups are shared now: both sides copy before writing
        return other

    @property
    def facts(self) -> Iterator[Any]:
        """Every fact of the state."""
        for group in self._sets.values():
            yield from group

    def groups(self) -> list[SigKey]:
        """The signature keys of the fact groups."""
        return list(self._sets)

    def texts(self, key: SigKey) -> tuple[str, ...]:
        """The texts (`fact_text`) of one group's facts that take part in state keys."""
        texts = self._texts.get(key)
        if texts is None:
            all_texts = (fact_text(prop) for prop in self._sets.get(key, ()))
            texts = tuple(text for text in all_texts if keep_for_key(text))
            self._texts[key] = texts
        return texts

    def add_fact(self, prop: Any, key: SigKey | None = None) -> None:
        """Add a fact (`key`: its signature key, when known)."""
        key = signature_key(prop) if key is None else key
        group = self._writable(key)
        if prop not in group:
            group.add(prop)
            self._changed(key)

    def add_facts(self, props: Iterable[Any]) -> None:
        """Add several facts."""
        for prop in props:
            self.add_fact(prop)

    def remove_fact(self, prop: Any, key: SigKey | None = None) -> None:
        """Remove a fact if present."""
        key = signature_key(prop) if key is None else key
        group = self._sets.get(key)
        if group is None or prop not in group:
            return
        self._writable(key).discard(prop)
        self._changed(key)

    def _changed(self, key: SigKey) -> None:
        self._sorted.pop(key, None)
        self._texts.pop(key, None)
        self._index.pop(key, None)

    def _writable(self, key: SigKey) -> set[Any]:
        group = self._sets.get(key)
        if group is None:
            group = self._sets[key] = set()
            self._owned.add(key)
        elif key not in self._owned:
            group = self._sets[key] = set(group)
            self._owned.add(key)
        return group

    def warm(self) -> None:
        """Sort every fact group now (copies inherit the sorted groups)."""
        for key in self._sets:
            self._sorted_facts(key)

    def _sorted_facts(self, key: SigKey) -> tuple[Any, ...]:
        facts = self._sorted.get(key)
        if facts is None:
            facts = tuple(sorted(self._sets.get(key, ()), key=_sort_key))
            self._sorted[key] = facts
        return facts

    def _matching(self, key: SigKey, positions: tuple[int, ...], values: tuple[Any, ...]) -> Any:
        """The facts of group `key` (sorted) whose arguments at `positions` are `values`."""
        by_positions = self._index.get(key)
        if by_positions is None:
            by_positions = self._index[key] = {}
        table = by_positions.get(positions)
        if table is None:
            table = {}
            for prop in self._sorted_facts(key):
                args = prop.arguments
                table.setdefault(tuple(args[i] for i in positions), []).append(prop)
            by_positions[positions] = table
        return table.get(values, ())

    def _signatures(self, pred: Any) -> Any:
        sig = (pred.name, tuple(ph.type for ph in pred.parameters))
        keys = self._subtypes.get(sig)
        if keys is None:
            types = [self.types.get(t) for t in sig[1]]
            keys = tuple(
                (pred.name, tuple(t.name for t in subtypes))
                for subtypes in self.types.multi_subtypes(types)
            )
            self._subtypes[sig] = keys
        return keys

    def all_assignments(
        self, rule: Any, mapping: dict[Any, Any], limit: int | None = None
    ) -> list[dict[Any, Any]]:
        """Every extension of `mapping` that makes all of `rule`'s preconditions facts (the
        first `limit` ones when given)."""
        preconditions = rule.preconditions
        bound = dict(mapping)
        used = set(bound.values())
        new_by_depth, fixed_by_depth = self._plan(rule, bound)
        results: list[dict[Any, Any]] = []
        self._search(preconditions, 0, bound, used, new_by_depth, fixed_by_depth, results, limit)
        return results

    def _plan(
        self, rule: Any, mapping: dict[Any, Any]
    ) -> tuple[list[list[Any]], list[tuple[int, ...]]]:
        """Per precondition: the placeholders it binds first, the argument positions bound."""
        cache_key = (id(rule), frozenset(mapping))
        cached = self._plans.get(cache_key)
        if cached is not None and cached[0] is rule:
            return cached[1], cached[2]
        seen = set(mapping)
        new_by_depth = []
        for pred in rule.preconditions:
            new = []
            for ph in pred.parameters:
                if ph not in seen:
                    new.append(ph)
                    seen.add(ph)
            new_by_depth.append(new)
        if any(ph not in seen for ph in rule.placeholders):
            raise NotImplementedError("queries with unconstrained placeholders are not supported")
        fixed_by_depth = [
            tuple(i for i, ph in enumerate(pred.parameters) if ph not in new)
            for pred, new in zip(rule.preconditions, new_by_depth, strict=True)
        ]
        self._plans[cache_key] = (rule, new_by_depth, fixed_by_depth)
        return new_by_depth, fixed_by_depth

    def _search(
        self,
        preconditions: Any,
        depth: int,
        bound: dict[Any, Any],
        used: set[Any],
        new_by_depth: list[list[Any]],
        fixed_by_depth: list[tuple[int, ...]],
        results: list[dict[Any, Any]],
        limit: int | None,
    ) -> bool:
        """Extend `results`; True once `limit` results are found."""
        if depth >= len(preconditions):
            results.append(dict(bound))
            return limit is not None and len(results) >= limit
        pred = preconditions[depth]
        params = pred.parameters
        new = new_by_depth[depth]
        fixed = fixed_by_depth[depth]
        values = tuple(bound[params[i]] for i in fixed)
        for key in self._signatures(pred):
            candidates = self._matching(key, fixed, values) if fixed else self._sorted_facts(key)
            for prop in candidates:
                ok = True
                for ph, var in zip(params, prop.arguments, strict=False):
                    existing = bound.get(ph)
                    if existing is None:
                        if var in used:
                            ok = False
                            break
                        bound[ph] = var
                        used.add(var)
                    elif existing != var:
                        ok = False
                        break
                done = ok and self._search(
                    preconditions,
                    depth + 1,
                    bound,
                    used,
                    new_by_depth,
                    fixed_by_depth,
                    results,
                    limit,
                )
                for ph in new:
                    var = bound.pop(ph, None)
                    used.discard(var)
                if done:
                    return True
        return False

    def any_assignment(self, rule: Any, mapping: dict[Any, Any]) -> bool:
        """Whether `rule`'s preconditions can all be met (a rule condition)."""
        return bool(self.all_assignments(rule, mapping, limit=1))
