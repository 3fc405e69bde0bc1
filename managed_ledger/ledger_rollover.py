"""Rollover of a ManagedLedger: create the next ledger, CAS it into the list, close the last.

A rollover starts when the current ledger is full (entries, size, or age: see rollover.py),
after a write failure, or on request. The new ledger is created while the old one's adds in
flight finish; adds that arrive meanwhile wait in the add pipeline's backlog and are written
to the new ledger in order. A failed create leaves the state CLOSED_LEDGER: the adds waiting
for it fail, and so do the adds queued behind them (they arrived while the old ledger closed:
stored, they would precede their producer's re-send of the failed ones); the next add retries it.
"""

from __future__ import annotations

import logging

import trio

from bookie.client.errors import BKError, BKNoSuchLedgerError
from managed_ledger.add_pipeline import LedgerWrites
from managed_ledger.errors import ManagedLedgerError
from managed_ledger.formats import LedgerInfo
from managed_ledger.ledger_client import LedgerHandleView
from managed_ledger.ledger_state import ManagedLedgerState, State, now_ms

log = logging.getLogger(__name__)


class LedgerRollover(ManagedLedgerState):
    def _maybe_roll_idle_ledger(self) -> None:
        if (
            self.state == State.LEDGER_OPENED
            and self._list.current is not None
            and self._list.current.entries > 0
            and self._is_current_full()
            and not self._add_backlog  # no add waiting: adds roll on their own
        ):
            self._start_rollover()

    def _install_current(self, lh: LedgerHandleView, info: LedgerInfo) -> None:
        self._list.append_current(info)
        self._current = lh
        self._current_created_ms = now_ms()
        self.last_ledger_created_ms = self._current_created_ms
        self._reserved_entries = 0
        self._reserved_size = 0
        self._current_writes = self._writes[lh.ledger_id] = LedgerWrites(info)

    async def _create_data_ledger(self) -> LedgerHandleView:
        c = self.config
        return await self.bk.create_ledger(
            c.ensemble_size,
            c.write_quorum,
            c.ack_quorum,
            password=c.password,
            custom_metadata={"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": self.name.encode()},
        )

    def _start_rollover(self) -> None:
        assert self._nursery is not None
        if self.state not in (State.LEDGER_OPENED, State.CLOSED_LEDGER):
            return
        old = self._current
        self._current = None
        self.state = State.CREATING_LEDGER
        self._ledger_ready = trio.Event()
        self._nursery.start_soon(self._rollover, old)

    async def _wait_drained(self, ledger_id: int) -> None:
        writes = self._writes.get(ledger_id)
        if writes is not None and writes.inflight > 0:
            if writes.drained is None or writes.drained.is_set():
                writes.drained = trio.Event()
            await writes.drained.wait()

    async def _rollover(self, old: LedgerHandleView | None) -> None:
        ready = self._ledger_ready
        try:
            # Creating the ledger overlaps with the old ledger's in-flight adds finishing.
            try:
                new_lh = await self._create_data_ledger()
            except BKError as e:
                log.warning("%s: creating a ledger failed: %s", self.name, e)
                self._rollover_error = e
                if self.state == State.CREATING_LEDGER:
                    self.state = State.CLOSED_LEDGER
                if old is not None:
                    await self._wait_drained(old.ledger_id)
                    await self._close_old_ledger(old)
                return
            if old is not None:
                await self._wait_drained(old.ledger_id)
            if self.state != State.CREATING_LEDGER:  # fenced or closed meanwhile
                await self.delete_ledger_quietly(new_lh.ledger_id)
                return
            if old is not None and old.ledger_id in self._list.by_id:
                self._list.by_id[old.ledger_id].timestamp_ms = now_ms()
            new_info = LedgerInfo(new_lh.ledger_id)
            try:
                async with self._metadata_lock:
                    await self._write_ledger_list(self._list.ledgers + [new_info])
            except ManagedLedgerError as e:
                await self.delete_ledger_quietly(new_lh.ledger_id)
                self._rollover_error = e
                if self.state == State.CREATING_LEDGER:
                    self.state = State.CLOSED_LEDGER
                return
            # drop a failed/empty old ledger from memory only on the next open (it is in the
            # list already; recovery handles it)
            self._install_current(new_lh, new_info)
            self.state = State.LEDGER_OPENED
            if old is not None:
                log.info("%s: rolled over from ledger %d (%d entries) to ledger %d", self.name, old.ledger_id,
                         old.last_add_confirmed + 1, new_lh.ledger_id)
                await self._close_old_ledger(old)
            else:
                log.info("%s: writing to new ledger %d", self.name, new_lh.ledger_id)
            self._schedule_trim()
            self._wake_readers()
        finally:
            ready.set()

    async def _close_old_ledger(self, old: LedgerHandleView) -> None:
        try:
            await old.close()
        except BKError as e:
            log.info("%s: closing ledger %d: %s", self.name, old.ledger_id, e)
        self._writes.pop(old.ledger_id, None)

    async def delete_ledger_quietly(self, ledger_id: int) -> bool:
        for attempt in range(max(self.config.delete_retries, 1)):
            try:
                await self.bk.delete_ledger(ledger_id)
                return True
            except BKNoSuchLedgerError:
                return True
            except BKError as e:
                log.warning("%s: deleting ledger %d failed (attempt %d): %s", self.name, ledger_id, attempt + 1, e)
                await trio.sleep(0.1 * (attempt + 1))
        return False

    async def rollover(self) -> None:
        """Force a rollover now (admin / tests); returns when the new ledger is in use."""
        self._check_writable()
        if self.state == State.LEDGER_OPENED and self._list.current and self._list.current.entries > 0:
            self._start_rollover()
        if self.state == State.CREATING_LEDGER:
            await self._ledger_ready.wait()
