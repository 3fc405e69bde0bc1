"""Reads of a ManagedLedger: the entry cache first, then the ledger's read handle."""

from __future__ import annotations

import logging
from itertools import repeat

from bookie.client.errors import BKError
from managed_ledger.errors import InvalidPositionError, ManagedLedgerError, ManagedLedgerFencedError
from managed_ledger.ledger_client import LedgerHandleView
from managed_ledger.ledger_state import ManagedLedgerState, State
from managed_ledger.position import Entry, Position

log = logging.getLogger(__name__)


class LedgerReads(ManagedLedgerState):
    async def _read_handle(self, ledger_id: int) -> LedgerHandleView:
        if self._current is not None and self._current.ledger_id == ledger_id:
            return self._current
        lh = self._read_handles.get(ledger_id)
        if lh is None:
            lh = await self.bk.open_ledger(ledger_id, self.config.password, recovery=False)
            self._read_handles[ledger_id] = lh
        return lh

    async def read_range(self, ledger_id: int, first: int, last: int, step: int | None = None) -> list[Entry]:
        """Entries first..last of one ledger: entry cache first, then the ledger client
        (``step`` entries per ledger-client read, default ``read_batch_size``)."""
        if self.state == State.FENCED:
            raise ManagedLedgerFencedError(self.name)
        out = self.cache.get_range(ledger_id, first, last)
        start = first + len(out)
        if start > last:
            return out
        try:
            lh = await self._read_handle(ledger_id)
            step = max(step or self.config.read_batch_size, 1)
            info = self._list.by_id.get(ledger_id)
            confirmed = info.entries if info is not None else 0
            while start <= last:
                end = min(last, start + step - 1)
                # The ledger list knows which entries were confirmed; a handle opened while
                # the writer had not closed the ledger yet (a rollover in progress, an owner
                # that died before closing it) may know a lower LAC: read those unconfirmed,
                # as Pulsar does.
                batch = await lh.read_payloads(start, end, unconfirmed=lh.last_add_confirmed < end < confirmed)
                # = [Entry(Position(ledger_id, e), data) ...] without two Python frames per
                # entry nor a bytecode loop (once per message a catch-up read sends)
                new = tuple.__new__
                positions = map(new, repeat(Position), zip(repeat(ledger_id), range(start, end + 1)))
                out += map(new, repeat(Entry), zip(positions, batch))
                start = end + 1
        except BKError as e:
            raise ManagedLedgerError(f"{self.name}: read {ledger_id}:{first}..{last} failed: {e}") from e
        return out

    async def read_entry(self, pos: Position) -> Entry:
        if not self.has_position(pos):
            raise InvalidPositionError(f"{self.name}: no entry at {pos}")
        return (await self.read_range(pos.ledger_id, pos.entry_id, pos.entry_id))[0]

    async def wait_for_entries_after(self, pos: Position) -> None:
        """Returns once an entry after `pos` is confirmed (or the ledger closes/fences)."""
        while self.last_confirmed_entry <= pos and self.state not in (State.CLOSED, State.FENCED, State.TERMINATED):
            self._readers_waiting += 1
            try:
                await self._new_entries.wait()
            finally:
                self._readers_waiting -= 1
