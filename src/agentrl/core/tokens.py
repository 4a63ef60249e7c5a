"""Token sequences stored once: an append-only buffer and prefix views of it.

Every prompt of a trajectory is a prefix of the next one (exact extension), so a trajectory
(each segment of it) keeps ONE `TokenBuffer` (packed 32-bit ids, 4 bytes a token) and every
turn's `prompt_tokens` is a `TokenPrefix`: the buffer and a length. A buffer only grows, so a
prefix never changes once made. `TokenPrefix` behaves like a tuple of ints where it is read
(`len`, indexing, iteration, `==` with tuples, `+`), so code written for tuple prompts keeps
working; `as_array()` gives the ids as numpy without converting each token.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import SupportsIndex, overload

import numpy as np
import numpy.typing as npt

__all__ = ["TokenBuffer", "TokenPrefix", "Tokens"]


class TokenBuffer:
    """An append-only sequence of token ids (packed); hand out prefixes with `prefix()`."""

    __slots__ = ("_data",)

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self._data = array("i", tokens)

    def __len__(self) -> int:
        return len(self._data)

    def extend(self, tokens: Iterable[int]) -> None:
        """Append `tokens` (earlier prefixes stay valid: nothing is ever overwritten)."""
        self._data.extend(tokens)

    def prefix(self, length: int | None = None) -> TokenPrefix:
        """The first `length` tokens (default: all so far), as an immutable view."""
        n = len(self._data) if length is None else length
        if not 0 <= n <= len(self._data):
            raise ValueError(f"prefix of {n} tokens from a buffer of {len(self._data)}")
        return TokenPrefix(self, n)


class TokenPrefix(Sequence[int]):
    """The first `len(self)` tokens of a `TokenBuffer`; reads like a tuple of ints."""

    __slots__ = ("_buffer", "_length")

    def __init__(self, buffer: TokenBuffer, length: int) -> None:
        self._buffer = buffer
        self._length = length

    @property
    def buffer(self) -> TokenBuffer:
        """The buffer this prefix reads (shared by the prompts of one trajectory segment)."""
        return self._buffer

    def __len__(self) -> int:
        return self._length

    def _array(self) -> array[int]:
        return self._buffer._data[: self._length]

    @overload
    def __getitem__(self, index: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step == 1:  # copy only the slice, not the whole prefix
                return tuple(self._buffer._data[start:stop])
            return tuple(self._array()[index])
        i = index.__index__()
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError("TokenPrefix index out of range")
        return self._buffer._data[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self._array())

    def to_tuple(self) -> tuple[int, ...]:
        """The tokens as a tuple."""
        return tuple(self._array())

    def as_array(self) -> npt.NDArray[np.int64]:
        """The tokens as an int64 numpy array (one bulk conversion)."""
        data = np.frombuffer(self._buffer._data, dtype=np.int32, count=self._length)
        return data.astype(np.int64)

    def is_prefix_of(self, other: TokenPrefix) -> bool:
        """True when both read the same buffer and this one is not longer (then it is, by
        construction, a prefix of `other`)."""
        return self._buffer is other._buffer and self._length <= other._length

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenPrefix):
            if other._buffer is self._buffer:
                return other._length == self._length
            return self._length == other._length and self._array() == other._array()
        if isinstance(other, tuple | list):
            return self._length == len(other) and self.to_tuple() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.to_tuple())

    def __add__(self, other: Sequence[int]) -> tuple[int, ...]:
        return (*self.to_tuple(), *other)

    def __radd__(self, other: Sequence[int]) -> tuple[int, ...]:
        return (*other, *self.to_tuple())

    def __repr__(self) -> str:
        head = ", ".join(str(t) for t in self._array()[:8])
        more = ", ..." if self._length > 8 else ""
        return f"TokenPrefix({self._length} tokens: {head}{more})"

    def __reduce__(self) -> tuple[type[TokenPrefix], tuple[TokenBuffer, int]]:
        return (TokenPrefix, (self._buffer, self._length))


Tokens = tuple[int, ...] | TokenPrefix
"""A token sequence as records hold it: a tuple, or a prefix of a shared buffer."""
