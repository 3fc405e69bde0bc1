"""Trimming of a ManagedLedger: delete the ledgers retention no longer keeps (retention.py
decides which); cursors behind them move forward before the list changes."""

from __future__ import annotations

import logging

from managed_ledger.ledger_client import close_quietly
from managed_ledger.ledger_state import ManagedLedgerState, State, now_ms
from managed_ledger.position import Position
from managed_ledger.retention import ledgers_to_delete

log = logging.getLogger(__name__)


class LedgerTrimming(ManagedLedgerState):
    def _slowest_durable_mark_delete(self) -> Position | None:
        durable = [c.mark_delete_position for c in self.cursors.values()]
        return min(durable) if durable else None

    async def trim(self) -> list[int]:
        """Delete the ledgers retention no longer keeps (see retention.py); returns ids."""
        async with self._trim_lock:
            if self.state in (State.CLOSED, State.FENCED, State.OPENING, State.CREATING_LEDGER):
                return []
            if not self._cursors_recovered:
                return []
            slowest = self._slowest_durable_mark_delete()
            current_id = self.current_ledger_id
            doomed = ledgers_to_delete(
                self._list.ledgers,
                current_ledger_id=current_id,
                slowest_mark_delete=slowest.as_tuple() if slowest else None,
                retention_time_ms=self.config.retention_time_ms,
                retention_size_mb=self.config.retention_size_mb,
                now_ms=now_ms(),
            )
            if not doomed:
                return []
            last = doomed[-1]
            doomed_ids = {li.ledger_id for li in doomed}
            async with self._metadata_lock:
                if self.state in (State.CLOSED, State.FENCED):
                    return []
                # cursors behind the deleted ledgers move forward before the list changes
                horizon = Position(last.ledger_id, last.entries - 1)
                for cursor in self._all_cursors():
                    if cursor.mark_delete_position < horizon:
                        cursor.advance_for_trim(horizon)
                remaining = [li for li in self._list.ledgers if li.ledger_id not in doomed_ids]
                await self._write_ledger_list(remaining)
                self._set_ledgers(remaining)
            for li in doomed:
                lh = self._read_handles.pop(li.ledger_id, None)
                if lh is not None:
                    await close_quietly(lh, log, self.name)
                self.cache.invalidate_ledger(li.ledger_id)
                if await self.delete_ledger_quietly(li.ledger_id):
                    self.ledgers_deleted_counter += 1
            log.info("%s: deleted ledgers %s (consumed by every subscription, past retention)", self.name,
                     sorted(doomed_ids))
            return sorted(doomed_ids)
