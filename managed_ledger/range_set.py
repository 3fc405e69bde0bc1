"""The range set of individually deleted entries above a cursor's mark-delete position.

Pure data structure. Ranges are closed ``[first, last]`` intervals of (ledger id, entry id)
pairs kept sorted and disjoint in two parallel lists, found by bisection; a range never
spans two ledgers (whether entry 0 of ledger B follows the last entry of ledger A is only
known to the managed ledger, which collapses such ranges into the mark-delete itself).
Inserting costs a bisection plus a list memmove, which stays in microseconds at the 10,000+
holes of a badly behaved subscription; the entry count is maintained incrementally.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Iterable, Iterator

Pair = tuple[int, int]  # (ledger id, entry id)


class RangeSet:
    __slots__ = ("_firsts", "_lasts", "_count")

    def __init__(self) -> None:
        self._firsts: list[Pair] = []
        self._lasts: list[Pair] = []
        self._count = 0  # entries covered by all ranges

    # --- queries ---------------------------------------------------------------
    def __len__(self) -> int:
        """Number of disjoint ranges."""
        return len(self._firsts)

    def __bool__(self) -> bool:
        return bool(self._firsts)

    @property
    def entry_count(self) -> int:
        return self._count

    def __contains__(self, pair: Pair) -> bool:
        return self.range_containing(pair) is not None

    def range_containing(self, pair: Pair) -> tuple[Pair, Pair] | None:
        i = bisect_right(self._firsts, pair) - 1
        if i >= 0 and self._lasts[i] >= pair:
            return self._firsts[i], self._lasts[i]
        return None

    def first_start_after(self, pair: Pair) -> Pair | None:
        """Start of the first range beginning strictly after `pair`."""
        i = bisect_right(self._firsts, pair)
        return self._firsts[i] if i < len(self._firsts) else None

    def first_range(self) -> tuple[Pair, Pair] | None:
        return (self._firsts[0], self._lasts[0]) if self._firsts else None

    def __iter__(self) -> Iterator[tuple[Pair, Pair]]:
        return zip(self._firsts, self._lasts)

    def ranges(self, limit: int | None = None) -> list[tuple[Pair, Pair]]:
        n = len(self._firsts) if limit is None else min(limit, len(self._firsts))
        return list(zip(self._firsts[:n], self._lasts[:n]))

    def count_between(self, lo: Pair, hi: Pair) -> int:
        """Entries of the set inside the closed interval [lo, hi]."""
        if not self._firsts or lo > hi:
            return 0
        total = 0
        i = max(bisect_right(self._firsts, lo) - 1, 0)
        n = len(self._firsts)
        while i < n and self._firsts[i] <= hi:
            a, b = self._firsts[i], self._lasts[i]
            a = max(a, lo)
            b = min(b, hi)
            # A range lies in one ledger, so a clamped pair with a <= b is in that ledger.
            if a <= b:
                total += b[1] - a[1] + 1
            i += 1
        return total

    # --- updates ---------------------------------------------------------------
    def add(self, first: Pair, last: Pair | None = None) -> int:
        """Add the closed range [first, last] (one ledger); returns entries newly covered."""
        if last is None:
            last = first
        if first[0] != last[0]:
            raise ValueError("a range must lie within one ledger")
        if first > last:
            return 0
        ledger = first[0]
        before = self._count
        firsts, lasts = self._firsts, self._lasts
        # Leftmost range that could touch: the one starting at or before first.
        i = bisect_right(firsts, first) - 1
        if i >= 0 and lasts[i][0] == ledger and lasts[i][1] >= first[1] - 1:
            new_first = firsts[i]
            new_last = max(last, lasts[i])
            start = i
        else:
            new_first, new_last = first, last
            start = i + 1
        # Absorb following ranges that overlap or are adjacent within the ledger.
        j = start
        n = len(firsts)
        while j < n and firsts[j][0] == ledger and firsts[j][1] <= new_last[1] + 1:
            if lasts[j] > new_last:
                new_last = lasts[j]
            j += 1
        for k in range(start, j):
            self._count -= lasts[k][1] - firsts[k][1] + 1
        firsts[start:j] = [new_first]
        lasts[start:j] = [new_last]
        self._count += new_last[1] - new_first[1] + 1
        return self._count - before

    def remove_up_to(self, pair: Pair) -> None:
        """Drop every entry <= pair (the mark-delete moved to pair)."""
        firsts, lasts = self._firsts, self._lasts
        j = bisect_right(lasts, pair)  # ranges [0, j) end at or before pair
        for k in range(j):
            self._count -= lasts[k][1] - firsts[k][1] + 1
        del firsts[:j]
        del lasts[:j]
        if firsts and firsts[0] <= pair:
            old = firsts[0]
            new = (pair[0], pair[1] + 1)
            self._count -= new[1] - old[1]
            firsts[0] = new

    def remove_from(self, pair: Pair) -> None:
        """Drop every entry >= pair (a reset moved the cursor backwards)."""
        firsts, lasts = self._firsts, self._lasts
        i = bisect_left(firsts, pair)
        for k in range(i, len(firsts)):
            self._count -= lasts[k][1] - firsts[k][1] + 1
        del firsts[i:]
        del lasts[i:]
        if lasts and lasts[-1] >= pair:
            old = lasts[-1]
            new = (pair[0], pair[1] - 1)
            self._count -= old[1] - new[1]
            lasts[-1] = new

    def clear(self) -> None:
        self._firsts.clear()
        self._lasts.clear()
        self._count = 0

    # --- (de)serialisation helpers ------------------------------------------------
    def to_flat(self, limit: int | None = None) -> list[int]:
        """[ledger, first_entry, last_entry, ...] for the first `limit` ranges."""
        out: list[int] = []
        for a, b in self.ranges(limit):
            out.extend((a[0], a[1], b[1]))
        return out

    @classmethod
    def from_flat(cls, flat: Iterable[int]) -> "RangeSet":
        rs = cls()
        it = iter(flat)
        for ledger, first, last in zip(it, it, it):
            rs.add((ledger, first), (ledger, last))
        return rs

    def to_pulsar_string(self) -> str:
        """Pulsar's internalStats rendering: ``[(L:a..L:b], ...]`` with open lower bounds."""
        return "[" + ", ".join(f"({a[0]}:{a[1] - 1}..{b[0]}:{b[1]}]" for a, b in self) + "]"

    def __repr__(self) -> str:
        return f"RangeSet({self.to_pulsar_string()})"
