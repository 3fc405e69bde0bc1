"""Read-ahead for a reader far behind: range reads in flight past what it has read.

A cursor that catches up reads every entry from the bookies, and its dispatcher would wait
for each read before it can send anything. After a read returns, the dispatcher asks the
cursor to read ahead (``ManagedCursor.read_ahead``): a range many dispatcher reads long (sized
by bytes, the broker's ``dispatcher_read_ahead_max_bytes``), in one ledger-client read per
ledger, started while at least half of it is still ahead, so the bookie reads overlap the
dispatch of what was read before (Pulsar's dispatcher reads the next batch while the previous
one is written to the consumers) and cost one trip to the bookie's disk thread (and one
wake-up of the event loop) per many dispatcher reads. A range that reaches the end of a
ledger goes on in the next one as a second read. Entries are immutable at their positions, so a read
ahead changes nothing about the cursor: the next read takes from it only if it starts
exactly where the read ahead does (a seek, a rewind or skipped acked entries make it start
elsewhere, and what was read ahead is dropped). Nothing is read ahead for entries still in
the entry cache (a tailing reader gets them from there), and what is read ahead does not
enter the entry cache: catch-up reads never evict the tail the caught-up readers need.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import trio

from managed_ledger.errors import ManagedLedgerError
from managed_ledger.position import Entry
from quire import hop_trace

if TYPE_CHECKING:
    from managed_ledger.ledger_reads import LedgerReads


class _Read:
    __slots__ = ("ledger_id", "first", "last", "scope", "done", "entries", "taken")

    def __init__(self, ledger_id: int, first: int, last: int) -> None:
        self.ledger_id, self.first, self.last = ledger_id, first, last
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        self.entries: list[Entry] | None = None  # None: failed or cancelled
        self.taken = 0  # entries[:taken] were handed out (not copying the rest at each take)


MAX_READS = 4  # reads ahead at once: one being taken, the rest in flight (one per ledger crossed)


class ReadAhead:
    """Contiguous reads ahead of a reader (at most ``MAX_READS``, in position order, each
    within one ledger), run in the managed ledger's nursery."""

    def __init__(self, ml: "LedgerReads") -> None:
        self._ml = ml
        self._reads: collections.deque[_Read] = collections.deque()
        self.started = 0  # counters for stats and tests
        self.used = 0

    @property
    def pending(self) -> tuple[int, int, int] | None:
        """(ledger_id, first, last) of everything read ahead and not taken yet."""
        if not self._reads:
            return None
        return self._reads[0].ledger_id, self._reads[0].first, self._reads[-1].last

    @property
    def entries(self) -> int:
        """Entries read ahead (or being read) and not taken yet."""
        return sum(p.last - p.first + 1 for p in self._reads)

    def starts_at(self, ledger_id: int, first: int) -> bool:
        """Nothing is read ahead, or it starts at ``ledger_id:first`` (else the caller
        cancels it: the reader moved elsewhere)."""
        if not self._reads:
            return True
        head = self._reads[0]
        return head.ledger_id == ledger_id and head.first == first

    def end(self) -> tuple[int, int] | None:
        """(ledger_id, last entry) of the last read ahead, None if nothing is."""
        return (self._reads[-1].ledger_id, self._reads[-1].last) if self._reads else None

    def start(self, ledger_id: int, first: int, last: int) -> bool:
        """Read ``first..last`` ahead, after what is read ahead already (the caller makes
        it contiguous); False if the managed ledger cannot run it (not running) or
        ``MAX_READS`` reads are out already."""
        nursery = self._ml._nursery
        if nursery is None or len(self._reads) >= MAX_READS:
            return False
        p = _Read(ledger_id, first, last)
        self._reads.append(p)
        self.started += 1
        nursery.start_soon(self._run, p)
        return True

    async def _run(self, p: _Read) -> None:
        try:
            with p.scope:
                if hop_trace.ENABLED:
                    hop_trace.mark("ra.start", p.first, p.last)
                # one ledger-client read for the whole range (it splits it by its own
                # max_entries_per_read_batch): fewer round trips to the bookie's disk thread
                p.entries = await self._ml.read_range(p.ledger_id, p.first, p.last, step=p.last - p.first + 1)
        except ManagedLedgerError:
            pass  # the reader's own read meets (and reports) the same problem
        finally:
            if hop_trace.ENABLED:
                hop_trace.mark("ra.done", p.first, len(p.entries or ()))
            p.done.set()

    def cancel(self) -> None:
        reads, self._reads = self._reads, collections.deque()
        for p in reads:
            p.scope.cancel()

    async def take(self, ledger_id: int, first: int, last: int) -> list[Entry] | None:
        """The entries read ahead for a read of ``first..last`` (a prefix of them, possibly
        fewer), or None if nothing read ahead starts there or the read failed."""
        if not self._reads:
            return None
        p = self._reads[0]
        if p.ledger_id != ledger_id or p.first != first:
            self.cancel()
            return None
        if not p.done.is_set():
            if hop_trace.ENABLED:
                hop_trace.mark("ra.wait", p.first)
            await p.done.wait()
            if p is not (self._reads[0] if self._reads else None):
                return None  # cancelled meanwhile (a seek, a close)
        # (a read already done is taken without a scheduler round: the dispatcher yields
        # once per round anyway, and this would add a second one per ~100 entries)
        entries = p.entries
        if not entries or p.taken >= len(entries):
            self.cancel()
            return None
        want = last - first + 1
        got = entries[p.taken : p.taken + want]
        if len(entries) - p.taken > want:
            p.taken += want
            p.first += want
        else:
            self._reads.popleft()
        self.used += 1
        return got
