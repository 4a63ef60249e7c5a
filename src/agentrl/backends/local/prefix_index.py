"""`PrefixIndex`: which stored token sequence shares the longest prefix with a query, in time
that grows with the query's branching points, not with the number of sequences stored.

A radix tree over the stored sequences: each edge holds a run of tokens, each node the ids of
the sequences ending there and the best `(length, id)` of its subtree. `best(query)` answers
what a scan of every sequence would: the longest common prefix (at least one token), ties
broken by the shorter sequence, then the smaller id (`tests/backends/test_local_kvcache.py`
compares the two on random operations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["PrefixIndex"]

Tokens = npt.NDArray[np.int64]
_Key = tuple[int, int]
"""`(sequence length, id)`: the smaller is the better of two equally long matches."""


def _common(a: Tokens, b: Tokens) -> int:
    n = min(a.size, b.size)
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@dataclass(eq=False)
class _Node:
    edge: Tokens
    """The tokens on the edge from the parent into this node."""
    children: dict[int, _Node] = field(default_factory=dict)
    """By the first token of the child's edge."""
    ends: dict[int, int] = field(default_factory=dict)
    """Ids of the sequences ending at this node, with their lengths."""
    best: _Key | None = None
    """The best key in this node's subtree."""

    def refresh(self) -> None:
        keys = [(length, i) for i, length in self.ends.items()]
        keys += [c.best for c in self.children.values() if c.best is not None]
        self.best = min(keys) if keys else None


class PrefixIndex:
    """Token sequences by id; `best(query)` finds the one sharing the longest prefix."""

    def __init__(self) -> None:
        self._root = _Node(np.zeros(0, dtype=np.int64))

    def add(self, key: int, tokens: Tokens) -> None:
        """Index `tokens` (non-empty) under id `key`."""
        if tokens.size == 0:
            raise ValueError("PrefixIndex stores non-empty sequences only")
        node, depth, path = self._root, 0, [self._root]
        while depth < tokens.size:
            child = node.children.get(int(tokens[depth]))
            if child is None:
                leaf = _Node(tokens[depth:])
                node.children[int(tokens[depth])] = leaf
                node = leaf
                path.append(leaf)
                depth = tokens.size
                break
            shared = _common(child.edge, tokens[depth:])
            if shared < child.edge.size:  # split the edge where the sequences part
                middle = _Node(child.edge[:shared])
                child.edge = child.edge[shared:]
                middle.children[int(child.edge[0])] = child
                middle.refresh()
                node.children[int(middle.edge[0])] = middle
                child = middle
            node = child
            path.append(node)
            depth += shared
        node.ends[key] = int(tokens.size)
        new = (int(tokens.size), key)
        for visited in path:  # a new sequence can only improve a subtree's best
            if visited.best is None or new < visited.best:
                visited.best = new

    def remove(self, key: int, tokens: Tokens) -> None:
        """Forget id `key`, indexed with `tokens`."""
        node, depth, path = self._root, 0, [self._root]
        while depth < tokens.size:
            node = node.children[int(tokens[depth])]
            path.append(node)
            depth += node.edge.size
        del node.ends[key]
        for parent, child in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
            if not child.ends and not child.children:
                del parent.children[int(child.edge[0])]
        for visited in reversed(path):  # only subtrees whose best was this key change
            if visited.best is not None and visited.best[1] == key:
                visited.refresh()

    def clear(self) -> None:
        """Forget every sequence."""
        self._root = _Node(np.zeros(0, dtype=np.int64))

    def best(self, query: Tokens) -> tuple[int, int] | None:
        """`(id, shared length)` of the sequence sharing the longest prefix with `query`
        (at least one token; ties: shorter sequence, then smaller id), or None."""
        node, depth = self._root, 0
        while depth < query.size:
            child = node.children.get(int(query[depth]))
            if child is None:
                break
            shared = _common(child.edge, query[depth:])
            if shared < child.edge.size:  # the query leaves the edge: all below share `depth`
                node, depth = child, depth + shared
                break
            node, depth = child, depth + shared
        if depth == 0 or node.best is None:
            return None
        return node.best[1], depth
