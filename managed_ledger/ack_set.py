"""Batch-index ack sets: bitsets in Java ``BitSet`` long-word layout.

Pulsar carries a batch's ack state as ``repeated int64 ack_set``: bit ``i`` lives in word
``i // 64`` at bit ``i % 64``, words are signed 64-bit, trailing zero words are dropped
(``BitSet.toLongArray``). A SET bit means "message i of the batch is still unacknowledged";
an acknowledgement clears bits, and an all-clear set means the whole entry is acked.
Pure module; one Python int holds the bits.
"""

from __future__ import annotations

from typing import Iterable

_MASK64 = (1 << 64) - 1


class AckSet:
    __slots__ = ("bits",)

    def __init__(self, bits: int = 0) -> None:
        if bits < 0:
            raise ValueError("bits must be non-negative")
        self.bits = bits

    @classmethod
    def all_unacked(cls, batch_size: int) -> "AckSet":
        """A batch of `batch_size` messages none of which is acked yet."""
        return cls((1 << batch_size) - 1)

    @classmethod
    def from_words(cls, words: Iterable[int]) -> "AckSet":
        bits = 0
        for i, w in enumerate(words):
            bits |= (w & _MASK64) << (64 * i)
        return cls(bits)

    def to_words(self) -> list[int]:
        words: list[int] = []
        bits = self.bits
        while bits:
            w = bits & _MASK64
            words.append(w - (1 << 64) if w >> 63 else w)  # as a signed Java long
            bits >>= 64
        return words

    @classmethod
    def from_indexes(cls, indexes: Iterable[int]) -> "AckSet":
        bits = 0
        for i in indexes:
            bits |= 1 << i
        return cls(bits)

    def indexes(self) -> list[int]:
        out, bits, i = [], self.bits, 0
        while bits:
            if bits & 1:
                out.append(i)
            bits >>= 1
            i += 1
        return out

    def intersect(self, other: "AckSet") -> "AckSet":
        """Bits still unacked in both: applying an ack (whose set bits are the messages
        it leaves unacked) to the current state."""
        return AckSet(self.bits & other.bits)

    def is_empty(self) -> bool:
        return self.bits == 0

    def cardinality(self) -> int:
        return self.bits.bit_count()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AckSet) and other.bits == self.bits

    def __hash__(self) -> int:
        return hash(self.bits)

    def __repr__(self) -> str:
        return f"AckSet({self.indexes()})"
