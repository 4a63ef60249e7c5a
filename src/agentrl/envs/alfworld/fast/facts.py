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

    __slots__ = ("_owned", "_sets", "_sorted", "_subtypes", "_texts", "types")

    def __init__(self, types: Any, subtypes_cache: dict[tuple[str, tuple[str, ...]], Any]) -> None:
        self.types = types
        self._subtypes = subtypes_cache
        self._sets: dict[SigKey, set[Any]] = {}
        self._sorted: dict[SigKey, tuple[Any, ...]] = {}
        self._texts: dict[SigKey, tuple[str, ...]] = {}
        self._owned: set[SigKey] = set()

    def copy(self) -> FactState:
        """An independent state sharing the unchanged fact groups (copy-on-write)."""
        other = FactState.__new__(FactState)
        other.types = self.types
        other._subtypes = self._subtypes
        other._sets = dict(self._sets)
        other._sorted = dict(self._sorted)
        other._texts = dict(self._texts)
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
            self._sorted.pop(key, None)
            self._texts.pop(key, None)

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
        self._sorted.pop(key, None)
        self._texts.pop(key, None)

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

    def all_assignments(self, rule: Any, mapping: dict[Any, Any]) -> list[dict[Any, Any]]:
        """Every extension of `mapping` that makes all of `rule`'s preconditions facts."""
        preconditions = rule.preconditions
        bound = dict(mapping)
        used = set(bound.values())
        seen = set(bound)
        new_by_depth = []
        for pred in preconditions:
            new = []
            for ph in pred.parameters:
                if ph not in seen:
                    new.append(ph)
                    seen.add(ph)
            new_by_depth.append(new)
        if any(ph not in seen for ph in rule.placeholders):
            raise NotImplementedError("queries with unconstrained placeholders are not supported")
        results: list[dict[Any, Any]] = []
        self._search(preconditions, 0, bound, used, new_by_depth, results)
        return results

    def _search(
        self,
        preconditions: Any,
        depth: int,
        bound: dict[Any, Any],
        used: set[Any],
        new_by_depth: list[list[Any]],
        results: list[dict[Any, Any]],
    ) -> None:
        if depth >= len(preconditions):
            results.append(dict(bound))
            return
        pred = preconditions[depth]
        params = pred.parameters
        new = new_by_depth[depth]
        for key in self._signatures(pred):
            for prop in self._sorted_facts(key):
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
                if ok:
                    self._search(preconditions, depth + 1, bound, used, new_by_depth, results)
                for ph in new:
                    var = bound.pop(ph, None)
                    used.discard(var)

    def any_assignment(self, rule: Any, mapping: dict[Any, Any]) -> bool:
        """Whether `rule`'s preconditions can all be met (a rule condition)."""
        return bool(self.all_assignments(rule, mapping))
