"""The entry cache: recently added entries, shared by all managed ledgers of a process.

Tailing cursors read what was just written from here and never touch the bookies. The
manager bounds the total bytes: past the budget the oldest inserted entries (of any
managed ledger) go first. A managed ledger also invalidates what every active cursor has
already read, and whole ledgers when they are trimmed. Pure data structure (no trio).
"""

from __future__ import annotations

from collections import deque

from managed_ledger.position import Entry, Position


class EntryCacheManager:
    """Process-wide byte budget over the per-managed-ledger caches."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.count = 0
        # insertion order across all caches; items may be stale (already invalidated)
        self._fifo: deque[tuple["EntryCache", int, int]] = deque()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def cache_for(self, name: str) -> "EntryCache":
        return EntryCache(self, name)

    def _evict(self) -> None:
        """Over budget: drop the oldest entries of any cache."""
        while self.size > self.max_bytes and self._fifo:
            c, l, e = self._fifo.popleft()
            if c._remove(l, e):
                self.evictions += 1
        self._compact()

    def _removed(self, size: int) -> None:
        self.size -= size
        self.count -= 1

    def _compact(self) -> None:
        fifo = self._fifo
        # Drop stale items at the head; rebuild if stale items pile up behind a live one.
        while fifo and not fifo[0][0]._has(fifo[0][1], fifo[0][2]):
            fifo.popleft()
        if len(fifo) > 2 * self.count + 1024:
            self._fifo = deque(item for item in fifo if item[0]._has(item[1], item[2]))


class EntryCache:
    """One managed ledger's slice of the cache: ledger id -> entry id -> bytes."""

    def __init__(self, manager: EntryCacheManager, name: str) -> None:
        self.manager = manager
        self.name = name
        self._ledgers: dict[int, dict[int, bytes]] = {}
        self.size = 0

    def _has(self, ledger_id: int, entry_id: int) -> bool:
        entries = self._ledgers.get(ledger_id)
        return entries is not None and entry_id in entries

    def _remove(self, ledger_id: int, entry_id: int) -> bool:
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            return False
        data = entries.pop(entry_id, None)
        if data is None:
            return False
        if not entries:
            del self._ledgers[ledger_id]
        self.size -= len(data)
        self.manager._removed(len(data))
        return True

    def insert(self, position: Position, data: bytes) -> None:
        size = len(data)
        manager = self.manager
        if size > manager.max_bytes:
            return
        ledger_id, entry_id = position
        entries = self._ledgers.get(ledger_id)
        if entries is None:
            entries = self._ledgers[ledger_id] = {}
        elif entry_id in entries:
            return
        entries[entry_id] = data
        self.size += size
        manager.size += size
        manager.count += 1
        manager._fifo.append((self, ledger_id, entry_id))
        if manager.size > manager.max_bytes or len(manager._fifo) > 2 * manager.count + 1024:
            manager._evict()

    def get_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """The cached entries first, first+1, ... up to last, stopping at the first miss."""
        entries = self._ledgers.get(ledger_id)
        out: list[Entry] = []
        if entries is not None:
            for entry_id in range(first, last + 1):
                data = entries.get(entry_id)
                if data is None:
                    break
                out.append(Entry(Position(ledger_id, entry_id), data))
        if out:
            self.manager.hits += len(out)
        else:
            self.manager.misses += 1
        return out

    def invalidate_before(self, position: Position) -> None:
        """Drop every entry strictly before `position` (all active cursors passed it)."""
        for ledger_id in [l for l in self._ledgers if l < position.ledger_id]:
            self.invalidate_ledger(ledger_id)
        entries = self._ledgers.get(position.ledger_id)
        if entries:
            # dicts keep insertion order, which is entry order: pop from the front
            for entry_id in list(entries):
                if entry_id >= position.entry_id:
                    break
                self._remove(position.ledger_id, entry_id)
        self.manager._compact()

    def invalidate_ledger(self, ledger_id: int) -> None:
        entries = self._ledgers.pop(ledger_id, None)
        if entries:
            for data in entries.values():
                self.size -= len(data)
                self.manager._removed(len(data))
        self.manager._compact()

    def clear(self) -> None:
        for ledger_id in list(self._ledgers):
            self.invalidate_ledger(ledger_id)
