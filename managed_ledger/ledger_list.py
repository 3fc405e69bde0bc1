"""The ordered ledgers of one managed ledger and the position arithmetic over them (pure).

Positions are ``(ledger id, entry id)``. A position may name an entry that exists, the slot
just before a ledger's first entry (``(L, -1)``, an 'earliest' mark-delete) or the next entry
to be written in the current ledger. Trimmed ledgers are gone from the list; empty ledgers are
skipped except the current one (it will hold the next entry). No I/O, no trio: the managed
ledger owns one ``LedgerList`` and mutates it under its own rules (rollover, trimming).
"""

from __future__ import annotations

from managed_ledger.formats import LedgerInfo
from managed_ledger.position import Position


class LedgerList:
    __slots__ = ("ledgers", "by_id", "current")

    def __init__(self) -> None:
        self.ledgers: list[LedgerInfo] = []
        self.by_id: dict[int, LedgerInfo] = {}
        self.current: LedgerInfo | None = None  # the ledger being written, if any

    def set(self, ledgers: list[LedgerInfo]) -> None:
        self.ledgers = ledgers
        self.by_id = {li.ledger_id: li for li in ledgers}

    def append_current(self, info: LedgerInfo) -> None:
        self.ledgers.append(info)
        self.by_id[info.ledger_id] = info
        self.current = info

    # ------------------------------------------------------------------ sizes
    @property
    def current_ledger_id(self) -> int:
        cur = self.current
        return cur.ledger_id if cur else (self.ledgers[-1].ledger_id if self.ledgers else -1)

    @property
    def number_of_entries(self) -> int:
        return sum(li.entries for li in self.ledgers)

    @property
    def total_size(self) -> int:
        return sum(li.size for li in self.ledgers)

    # ------------------------------------------------------------------ positions
    def first_position(self) -> Position:
        """The position just before the first stored entry (an 'earliest' mark-delete)."""
        for li in self.ledgers:
            if li.entries > 0 or li is self.current:
                return Position(li.ledger_id, -1)
        return Position(self.current_ledger_id, -1)

    def next_valid_position(self, pos: Position) -> Position:
        """The first position after `pos` that may hold an entry (skipping ledger ends,
        trimmed and empty ledgers); beyond the last entry it is the next one to be written."""
        return self.normalize(Position(pos.ledger_id, pos.entry_id + 1))

    def normalize(self, pos: Position) -> Position:
        """Move a read position past ledger ends and missing ledgers."""
        li = self.by_id.get(pos.ledger_id)
        if li is not None and (li is self.current or pos.entry_id < li.entries):
            return pos
        for nxt in self.ledgers:
            if nxt.ledger_id > pos.ledger_id and (nxt.entries > 0 or nxt is self.current):
                return Position(nxt.ledger_id, 0)
        return pos

    def previous_position(self, pos: Position) -> Position:
        """The last entry before `pos` (or (first ledger, -1))."""
        if pos.entry_id > 0 and pos.ledger_id in self.by_id:
            return Position(pos.ledger_id, pos.entry_id - 1)
        prev = None
        for li in self.ledgers:
            if li.ledger_id >= pos.ledger_id:
                break
            if li.entries > 0:
                prev = li
        if prev is not None:
            return Position(prev.ledger_id, prev.entries - 1)
        if pos.ledger_id in self.by_id:
            return Position(pos.ledger_id, pos.entry_id - 1)
        return self.first_position()

    def count_entries_between(self, after: Position, upto: Position) -> int:
        """Entries in (after, upto]."""
        total = 0
        for li in self.ledgers:
            if li.ledger_id < after.ledger_id:
                continue
            if li.ledger_id > upto.ledger_id:
                break
            lo = after.entry_id + 1 if li.ledger_id == after.ledger_id else 0
            hi = li.entries - 1
            if li.ledger_id == upto.ledger_id:
                hi = min(hi, upto.entry_id)
            if hi >= lo:
                total += hi - lo + 1
        return total

    def position_at_offset(self, after: Position, offset: int) -> Position | None:
        """The `offset`-th entry (0-based) after `after`, or None past the end."""
        for li in self.ledgers:
            if li.ledger_id < after.ledger_id:
                continue
            lo = after.entry_id + 1 if li.ledger_id == after.ledger_id else 0
            n = li.entries - lo
            if n <= 0:
                continue
            if offset < n:
                return Position(li.ledger_id, lo + offset)
            offset -= n
        return None

    def has_position(self, pos: Position) -> bool:
        li = self.by_id.get(pos.ledger_id)
        return li is not None and 0 <= pos.entry_id < li.entries
