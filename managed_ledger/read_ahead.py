"""Read-ahead for a reader far behind: one range read in flight past what it has read.

A cursor that catches up reads every entry from the bookies, and its dispatcher would wait
for each read before it can send anything. After a read returns, the dispatcher asks the
cursor to read the next range ahead (``ManagedCursor.read_ahead``), so the bookie read of
range k+1 overlaps the dispatch of range k (Pulsar's dispatcher reads the next batch while
the previous one is written to the consumers). Entries are immutable at their positions,
so a read ahead changes nothing about the cursor: the next read uses it only if it starts
exactly where the read ahead started (a seek, a rewind or skipped acked entries make it
start elsewhere and the read ahead is cancelled). Nothing is read ahead for entries still in
the entry cache (a tailing reader gets them from there), and what is read ahead does not
enter the entry cache: catch-up reads never evict the tail the caught-up readers need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from managed_ledger.errors import ManagedLedgerError
from managed_ledger.position import Entry

if TYPE_CHECKING:
    from managed_ledger.ledger_reads import LedgerReads


class _Read:
    __slots__ = ("ledger_id", "first", "last", "scope", "done", "entries")

    def __init__(self, ledger_id: int, first: int, last: int) -> None:
        self.ledger_id, self.first, self.last = ledger_id, first, last
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.entries: list[Entry] | None = None  # None: failed or cancelled


class ReadAhead:
    """At most one outstanding read of ``ledger_id:first..last``, run in the managed
    ledger's nursery."""

    def __init__(self, ml: "LedgerReads") -> None:
        self._ml = ml
        self._pending: _Read | None = None
        self.started = 0  # counters for stats and tests
        self.used = 0

    @property
    def pending(self) -> tuple[int, int, int] | None:
        """(ledger_id, first, last) of the read in flight or done but not taken yet."""
        p = self._pending
        return None if p is None else (p.ledger_id, p.first, p.last)

    def start(self, ledger_id: int, first: int, last: int) -> bool:
        """Read ``first..last`` ahead (replacing any earlier read ahead); False if the
        managed ledger cannot run it (not running)."""
        nursery = self._ml._nursery
        if nursery is None:
            return False
        self.cancel()
        p = self._pending = _Read(ledger_id, first, last)
        self.started += 1
        nursery.start_soon(self._run, p)
        return True

    async def _run(self, p: _Read) -> None:
        try:
            with p.scope:
                p.entries = await self._ml.read_range(p.ledger_id, p.first, p.last)
        except ManagedLedgerError:
            pass  # the reader's own read meets (and reports) the same problem
        finally:
            p.done.set()

    def cancel(self) -> None:
        p, self._pending = self._pending, None
        if p is not None:
            p.scope.cancel()

    async def take(self, ledger_id: int, first: int, last: int) -> list[Entry] | None:
        """The entries read ahead for a read of ``first..last`` (a prefix of them, possibly
        fewer), or None if no read ahead starts there or it failed."""
        p = self._pending
        if p is None:
            return None
        if p.ledger_id != ledger_id or p.first != first:
            self.cancel()
            return None
        self._pending = None
        await p.done.wait()
        if not p.entries:
            return None
        self.used += 1
        return p.entries[: last - first + 1]
