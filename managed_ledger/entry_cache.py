"""The entry cache: recently added entries, shared by all managed ledgers of a process.

Tailing cursors read what was just written from here and never touch the bookies. A
managed ledger invalidates what every active cursor has already read, and whole ledgers
when they are trimmed. The manager bounds the total bytes like Pulsar's
EntryCacheDefaultEvictionPolicy: past the budget, the largest caches give up their oldest
entries until the total is back under ``eviction_watermark`` x budget (eviction runs in
batches, so an insert costs a dict store and a few counters). Pure data structure (no trio).
"""

from __future__ import annotations

from managed_ledger.position import Entry, Position


class EntryCacheManager:
    """Process-wide byte budget over the per-managed-ledger caches."""

    def __init__(self, max_bytes: int, eviction_watermark: float = 0.9) -> None:
        self.max_bytes = max_bytes
        self.eviction_watermark = eviction_watermark
        self.size = 0
        self._non_empty: dict["EntryCache", None] = {}  # caches holding entries (ordered set)
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def cache_for(self, name: str) -> "EntryCache":
        return EntryCache(self, name)

    @property
    def count(self) -> int:
        return sum(c.count for c in self._non_empty)

    def _over_budget(self, cache: "EntryCache", position: Position, size: int) -> None:
        if size > self.max_bytes:  # never cache an entry larger than the whole budget
            entries = cache._ledgers[position[0]]
            del entries[position[1]]
            if not entries:
                del cache._ledgers[position[0]]
            cache._removed(size)
        if self.size > self.max_bytes:
            self._evict()

    def _evict(self) -> None:
        """Over budget: the largest caches drop their oldest entries down to the watermark."""
        target = int(self.max_bytes * self.eviction_watermark)
        for cache in sorted(self._non_empty, key=lambda c: c.size, reverse=True):
            if self.size <= target:
                break
            self.evictions += cache._evict_oldest(self.size - target)


class EntryCache:
    """One managed ledger's slice of the cache: ledger id -> entry id -> bytes (each
    ledger's dict in insertion order, which is entry order for added entries; a ledger
    without entries has no dict)."""

    def __init__(self, manager: EntryCacheManager, name: str) -> None:
        self.manager = manager
        self.name = name
        self._ledgers: dict[int, dict[int, bytes]] = {}
        self.size = 0

    @property
    def count(self) -> int:
        return sum(len(entries) for entries in self._ledgers.values())

    def _removed(self, size: int) -> None:
        """Bytes left the cache (their ledger dicts are already updated)."""
        self.size -= size
        self.manager.size -= size
        if not self._ledgers:
            self.manager._non_empty.pop(self, None)

    def insert(self, position: Position, data: bytes) -> None:
        ledger_id, entry_id = position
        entries = self._ledgers.get(ledger_id)
        if entries is not None and entry_id in entries:
            return
        self.insert_new(position, data)

    def insert_new(self, position: Position, data: bytes) -> None:
        """`insert` for a position just added (never cached yet): the add hot path, so
        only a dict store and two counters unless a ledger starts or the budget is hit."""
        entries = self._ledgers.get(position[0])
        if entries is None:
            entries = self._ledgers[position[0]] = {}
            self.manager._non_empty[self] = None
        entries[position[1]] = data
        size = len(data)
        self.size += size
        manager = self.manager
        manager.size += size
        if manager.size > manager.max_bytes:
            manager._over_budget(self, position, size)

    def _evict_oldest(self, nbytes: int) -> int:
        """Drop the oldest entries (lowest ledger, then entry) until `nbytes` are freed;
        returns how many entries went."""
        freed = dropped = 0
        for ledger_id in sorted(self._ledgers):
            entries = self._ledgers[ledger_id]
            doomed = []
            # one pass over the keys (repeated next(iter()) after front pops is quadratic)
            for entry_id, data in entries.items():
                if freed >= nbytes:
                    break
                doomed.append(entry_id)
                freed += len(data)
            for entry_id in doomed:
                del entries[entry_id]
            dropped += len(doomed)
            if entries:
                break
            del self._ledgers[ledger_id]
        self._removed(freed)
        return dropped

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        entries = self._ledgers.get(ledger_id)
        return entries is not None and entry_id in entries

    def get_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """The cached entries first, first+1, ... up to last, stopping at the first miss."""
        entries = self._ledgers.get(ledger_id)
        out: list[Entry] = []
        if entries is not None:
            new = tuple.__new__  # = Entry(Position(...), data) without two Python frames
            for entry_id in range(first, last + 1):
                data = entries.get(entry_id)
                if data is None:
                    break
                out.append(new(Entry, (new(Position, (ledger_id, entry_id)), data)))
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
            # dicts keep insertion order, which is entry order: the doomed ones lead
            doomed = []
            for entry_id in entries:
                if entry_id >= position.entry_id:
                    break
                doomed.append(entry_id)
            if doomed:
                freed = sum(len(entries.pop(entry_id)) for entry_id in doomed)
                if not entries:
                    del self._ledgers[position.ledger_id]
                self._removed(freed)

    def invalidate_ledger(self, ledger_id: int) -> None:
        entries = self._ledgers.pop(ledger_id, None)
        if entries is not None:
            self._removed(sum(len(d) for d in entries.values()))

    def clear(self) -> None:
        for ledger_id in list(self._ledgers):
            self.invalidate_ledger(ledger_id)
