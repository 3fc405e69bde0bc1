"""ReadCache: entries read from entry logs, kept in insertion order and evicted FIFO.

Read-ahead fills it with the entries that follow a missed one in the same ledger, so a
sequential reader (a catching-up consumer) pays one disk read per batch, not per entry.
Bounded by bytes; touched from the event loop only (reads insert their results after the
worker thread returns).
"""

from __future__ import annotations

from collections import OrderedDict


class ReadCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[tuple[int, int], bytes] = OrderedDict()

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self._entries.get((ledger_id, entry_id))

    def put(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        n = len(data)
        if n > self.max_bytes:
            return
        key = (ledger_id, entry_id)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= len(old)
        while self.size + n > self.max_bytes and self._entries:
            _, evicted = self._entries.popitem(last=False)
            self.size -= len(evicted)
        self._entries[key] = data
        self.size += n

    def drop_ledger(self, ledger_id: int) -> None:
        for key in [k for k in self._entries if k[0] == ledger_id]:
            self.size -= len(self._entries.pop(key))

    def __len__(self) -> int:
        return len(self._entries)
