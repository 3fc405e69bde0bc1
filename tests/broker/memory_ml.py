"""Test-only in-memory stand-in for the managed-ledger API in docs/contracts.md.

Lets the broker's protocol and dispatch tests run without bookies. Entries live in one list
per managed ledger (ledger id 1, entry ids from 0); cursors keep a mark-delete position, a
read position and individually deleted positions, like ManagedCursor.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import trio

from managed_ledger import Entry, ManagedLedgerConfig, Position
from managed_ledger.errors import CursorNotFoundError, InvalidPositionError, ManagedLedgerClosedError, ManagedLedgerError

LEDGER = 1


class MemoryCursor:
    def __init__(self, ml: "MemoryManagedLedger", name: str, start: int, durable: bool = True) -> None:
        self.ml = ml
        self.name = name
        self.durable = durable
        self._md = start - 1  # last acked entry id (mark-delete)
        self._read = start
        self.deleted: set[int] = set()
        self.batch: dict[Position, list[int]] = {}
        self.properties: dict[str, int] = {}
        self.closed = False
        self.read_aheads: list[tuple[int, int]] = []  # (read position, max entries) per read_ahead call

    @property
    def mark_delete_position(self) -> Position:
        return Position(LEDGER, self._md)

    @property
    def read_position(self) -> Position:
        return Position(LEDGER, self._read)

    @property
    def number_of_entries_in_backlog(self) -> int:
        n = len(self.ml.entries) - 1 - self._md
        return max(0, n - len([d for d in self.deleted if d > self._md]))

    @property
    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        return [(Position(LEDGER, d - 1), Position(LEDGER, d)) for d in sorted(self.deleted)]

    @property
    def batch_deleted_indexes(self) -> dict[Position, list[int]]:
        return dict(self.batch)

    async def read_entries(self, max_entries: int) -> list[Entry]:
        await trio.lowlevel.checkpoint()
        out: list[Entry] = []
        while self._read < len(self.ml.entries) and len(out) < max_entries:
            if self._read not in self.deleted and self._read > self._md:
                out.append(Entry(Position(LEDGER, self._read), self.ml.entries[self._read]))
            self._read += 1
        return out

    def read_ahead(self, max_entries: int) -> None:
        self.read_aheads.append((self._read, max_entries))  # entries are in memory: nothing to do

    async def read_entries_or_wait(self, max_entries: int) -> list[Entry]:
        while True:
            out = await self.read_entries(max_entries)
            if out:
                return out
            await self.ml._added.wait()

    def _advance(self) -> None:
        while self._md + 1 in self.deleted:
            self._md += 1
            self.deleted.discard(self._md)
        self.deleted = {d for d in self.deleted if d > self._md}
        self._read = max(self._read, self._md + 1)

    async def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        await trio.lowlevel.checkpoint()
        if position.entry_id >= len(self.ml.entries):
            raise InvalidPositionError(str(position))
        self._md = max(self._md, position.entry_id)
        if properties:
            self.properties = dict(properties)
        self._advance()

    async def delete(self, positions: Iterable[Position], ack_sets: Mapping[Position, Sequence[int]] | None = None) -> None:
        await trio.lowlevel.checkpoint()
        for p in positions:
            if ack_sets and p in ack_sets and any(ack_sets[p]):
                self.batch[p] = list(ack_sets[p])
                continue
            self.batch.pop(p, None)
            if p.entry_id > self._md:
                self.deleted.add(p.entry_id)
        self._advance()

    async def skip_entries(self, n: int) -> None:
        e, skipped = self._md, 0
        while skipped < n and e + 1 < len(self.ml.entries):
            e += 1
            if e not in self.deleted:
                skipped += 1
        if e > self._md:
            await self.mark_delete(Position(LEDGER, e))

    async def clear_backlog(self) -> None:
        if self.ml.entries:
            await self.mark_delete(self.ml.last_confirmed_entry)

    async def seek(self, position: Position) -> None:
        self._read = max(position.entry_id, self._md + 1)

    async def reset_cursor(self, position: Position) -> None:
        e = position.entry_id if position.ledger_id == LEDGER else (0 if position.ledger_id < LEDGER else len(self.ml.entries))
        e = max(0, min(e, len(self.ml.entries)))
        self._md = e - 1
        self._read = e
        self.deleted.clear()
        self.batch.clear()

    async def find_newest_matching(self, predicate: Callable[[Entry], bool], all_entries: bool = False) -> Position | None:
        found = None
        for i in range(0 if all_entries else max(0, self._md + 1), len(self.ml.entries)):
            if predicate(Entry(Position(LEDGER, i), self.ml.entries[i])):
                found = Position(LEDGER, i)
            else:
                break
        return found

    async def close(self) -> None:
        self.closed = True


class MemoryManagedLedger:
    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: list[bytes] = []
        self.cursors: dict[str, MemoryCursor] = {}
        self._added = trio.Event()
        self.closed = False

    async def add_entry(self, data: bytes) -> Position:
        if self.closed:
            raise ManagedLedgerClosedError(self.name)
        self.entries.append(bytes(data))
        pos = Position(LEDGER, len(self.entries) - 1)
        await trio.lowlevel.checkpoint()
        self._added.set()
        self._added = trio.Event()
        return pos

    def async_add_entry(self, data: bytes, callback: Callable[[Position | None, ManagedLedgerError | None], None]) -> None:
        if self.closed:
            raise ManagedLedgerClosedError(self.name)
        self.entries.append(bytes(data))
        pos = Position(LEDGER, len(self.entries) - 1)

        async def complete() -> None:  # like the real one: the callback comes later
            await trio.lowlevel.checkpoint()
            self._added.set()
            self._added = trio.Event()
            callback(pos, None)

        trio.lowlevel.spawn_system_task(complete)

    async def open_cursor(self, name: str, initial_position: str = "latest") -> MemoryCursor:
        if name not in self.cursors:
            start = 0 if initial_position == "earliest" else len(self.entries)
            self.cursors[name] = MemoryCursor(self, name, start)
        return self.cursors[name]

    def open_non_durable_cursor(self, start: Position | None = None, inclusive: bool = True) -> MemoryCursor:
        if start is None:
            e = len(self.entries)
        elif start.ledger_id < 0:
            e = 0
        elif start.ledger_id > LEDGER:
            e = len(self.entries)
        else:
            e = start.entry_id if inclusive else start.entry_id + 1
        return MemoryCursor(self, "non-durable", max(0, min(e, len(self.entries))), durable=False)

    async def delete_cursor(self, name: str) -> None:
        if self.cursors.pop(name, None) is None:
            raise CursorNotFoundError(name)

    @property
    def last_confirmed_entry(self) -> Position:
        return Position(LEDGER, len(self.entries) - 1)

    @property
    def number_of_entries(self) -> int:
        return len(self.entries)

    @property
    def total_size(self) -> int:
        return sum(len(e) for e in self.entries)

    def has_position(self, position: Position) -> bool:
        return position.ledger_id == LEDGER and 0 <= position.entry_id < len(self.entries)

    async def read_entry(self, position: Position) -> Entry:
        if not self.has_position(position):
            raise InvalidPositionError(str(position))
        await trio.lowlevel.checkpoint()
        return Entry(position, self.entries[position.entry_id])

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        await trio.lowlevel.checkpoint()
        return [Entry(Position(ledger_id, i), self.entries[i]) for i in range(first, last + 1)]

    def first_position(self) -> Position:
        return Position(LEDGER, -1)

    def next_valid_position(self, position: Position) -> Position:
        return Position(LEDGER, position.entry_id + 1)

    def previous_position(self, position: Position) -> Position:
        return Position(LEDGER, position.entry_id - 1)

    async def terminate(self) -> Position:
        self.closed = True
        return self.last_confirmed_entry

    async def close(self) -> None:
        self.closed = True

    @property
    def closing(self) -> bool:
        return self.closed

    def internal_stats(self) -> dict[str, Any]:
        return {"numberOfEntries": len(self.entries), "lastConfirmedEntry": str(self.last_confirmed_entry)}

    async def trim(self) -> None:
        await trio.lowlevel.checkpoint()

    def set_config(self, **changes: Any) -> None:
        pass


class MemoryManagedLedgerFactory:
    def __init__(self) -> None:
        self.ledgers: dict[str, MemoryManagedLedger] = {}

    async def __aenter__(self) -> "MemoryManagedLedgerFactory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> MemoryManagedLedger:
        ml = self.ledgers.get(name)
        if ml is None or ml.closed:
            old = ml
            ml = MemoryManagedLedger(name)
            if old is not None:
                ml.entries, ml.cursors = old.entries, old.cursors
                for c in ml.cursors.values():
                    c.ml = ml
            self.ledgers[name] = ml
        return ml

    async def delete(self, name: str) -> None:
        self.ledgers.pop(name, None)

    async def list_names(self, prefix: str = "") -> list[str]:
        return sorted(n for n in self.ledgers if n.startswith(prefix))
