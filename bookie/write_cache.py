"""WriteCache: two halves (active, being flushed) holding entries until a checkpoint.

Adds go into the active half. A checkpoint swaps the halves, writes the being-flushed half to
the entry logs sorted by (ledger, entry) and then drops it. If the active half fills while the
other is still being flushed, ``put`` refuses and the caller throttles (waits for the flush,
then gives up with TOO_MANY_REQUESTS). Reads look at the active half, then the flushing one.
"""

from __future__ import annotations


class WriteCacheHalf:
    __slots__ = ("entries", "size", "last_entry")

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int], bytes] = {}
        self.size = 0
        self.last_entry: dict[int, int] = {}

    def sorted_entries(self) -> list[tuple[int, int, bytes]]:
        return [(l, e, self.entries[(l, e)]) for (l, e) in sorted(self.entries)]

    def __len__(self) -> int:
        return len(self.entries)


class WriteCache:
    def __init__(self, max_bytes: int) -> None:
        self.half_limit = max(max_bytes // 2, 1)
        self.active = WriteCacheHalf()
        self.flushing: WriteCacheHalf | None = None

    @property
    def is_full(self) -> bool:
        return self.active.size >= self.half_limit

    def put(self, ledger_id: int, entry_id: int, data: bytes, force: bool = False) -> bool:
        """Store an entry; False if the active half has no room (an oversized entry still
        fits into an empty half so it can never block forever). ``force`` stores it past the
        limit (a journal replay that cannot flush: the disk is full)."""
        half = self.active
        n = len(data)
        if half.size + n > self.half_limit and half.size > 0 and not force:
            return False
        key = (ledger_id, entry_id)
        old = half.entries.get(key)
        if old is not None:
            half.size -= len(old)
        half.entries[key] = data
        half.size += n
        last = half.last_entry.get(ledger_id, -1)
        if entry_id > last:
            half.last_entry[ledger_id] = entry_id
        return True

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        key = (ledger_id, entry_id)
        data = self.active.entries.get(key)
        if data is None and self.flushing is not None:
            data = self.flushing.entries.get(key)
        return data

    def last_entry(self, ledger_id: int) -> int:
        """Highest entry id of the ledger held in either half (-1 if none)."""
        last = self.active.last_entry.get(ledger_id, -1)
        if self.flushing is not None:
            last = max(last, self.flushing.last_entry.get(ledger_id, -1))
        return last

    def swap(self) -> WriteCacheHalf:
        """Make the active half the one being flushed; the caller must call flushed() after."""
        if self.flushing is not None:
            raise RuntimeError("write cache swap while a flush is in progress")
        self.flushing, self.active = self.active, WriteCacheHalf()
        return self.flushing

    def flushed(self) -> None:
        self.flushing = None

    def drop_ledger(self, ledger_id: int) -> None:
        for half in (self.active, self.flushing):
            if half is None or ledger_id not in half.last_entry:
                continue
            for key in [k for k in half.entries if k[0] == ledger_id]:
                half.size -= len(half.entries.pop(key))
            del half.last_entry[ledger_id]
