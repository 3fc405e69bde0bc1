"""Ledger recovery (fencing): close a ledger another client left OPEN, without truncating it.

BookKeeper's ``LedgerRecoveryOp`` with the quorum-coverage rules of seed 000:

1. CAS the metadata to IN_RECOVERY (nothing to do if it is CLOSED).
2. Fence: READ(entry -1, FENCE) to every bookie of the last ensemble, until quorum coverage
   (no write set keeps AQ unfenced bookies). The old writer's next add then fails FENCED.
3. Start after ``max(max LAC found, first entry of the last ensemble - 1)``.
4. Read forward with fencing recovery reads (a pipelined window, decided in entry order).
   An entry is recoverable on its first positive reply, unrecoverable after WQ-AQ+1
   NO_ENTRY/NO_LEDGER replies; errors and timeouts are unknown. If an entry ends with
   neither threshold reached, recovery aborts (the ledger stays IN_RECOVERY, nothing closed).
5. Re-write each recovered entry byte for byte with RECOVERY_ADD (accepted despite the fence).
   A failed bookie is replaced, but only in memory: the new segments are written together with
   CLOSED, the last recovered entry and its length in one CAS, so an aborted attempt never
   leaves metadata pointing at a replacement that lacks re-written (maybe acknowledged) entries.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import trio

from bookie.client.distribution import ReplyKind, RecoveryOutcome, RecoveryReadTracker, classify, write_set
from bookie.client.errors import BKError, BKLedgerRecoveryError
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_manager import Versioned
from bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from bookie.client.read_ops import PendingReadOp, read_lac, verified_entry
from bookie.protocol import Flag, Op, Request, Response, Status

if TYPE_CHECKING:
    from bookie.client.client_context import ClientContext

__all__ = ["LedgerRecoveryOp"]


class _RecoveryRead:
    __slots__ = ("tracker", "decided", "data", "length")

    def __init__(self, write_quorum: int, ack_quorum: int) -> None:
        self.tracker = RecoveryReadTracker(write_quorum, ack_quorum)
        self.decided = trio.Event()
        self.data: bytes | None = None
        self.length = 0


class LedgerRecoveryOp:
    def __init__(self, ctx: "ClientContext", ledger_id: int, current: Versioned, master_key: bytes) -> None:
        self._ctx = ctx
        self.ledger_id = ledger_id
        self._md, self._version = current
        self._master_key = master_key
        # Observability for tests and logs.
        self.fenced_lac = -1
        self.recovered_entries = 0

    async def run(self) -> Versioned:
        if self._md.is_closed:
            return self._md, self._version
        md, version = await self._ctx.ledger_manager.update(self.ledger_id, (self._md, self._version), _mark_in_recovery)
        if md.is_closed:
            return md, version
        fence = await read_lac(self._ctx, self.ledger_id, md, fence=True, master_key=self._master_key)
        self.fenced_lac = fence.lac
        start = max(fence.lac, md.last_ensemble_first_entry - 1)
        length = await self._length_at(md, start)

        handle = LedgerHandle(self._ctx, self.ledger_id, md, version, master_key=self._master_key,
                              writable=True, recovery=True)
        handle._set_recovered(start, length)
        await self._recover_entries(md, handle, start + 1)
        await handle._drain()
        if handle._error is not None:
            raise BKLedgerRecoveryError(f"ledger {self.ledger_id}: re-writing recovered entries failed: "
                                        f"{handle._error}") from handle._error
        last, length = handle.last_add_confirmed, handle.length

        original, final_ensembles = md.ensembles, handle._md.ensembles

        def close(m: LedgerMetadata) -> LedgerMetadata | None:
            if m.is_closed:
                return None  # another recoverer closed it first: its end is the ledger's end
            if not m.same_tail(md):
                raise BKLedgerRecoveryError(f"ledger {self.ledger_id}: ensembles changed during recovery")
            # the segments our re-writes went to, together with the end, in one CAS; earlier
            # segments as stored (auto-recovery may have re-replicated one meanwhile)
            ensembles = m.ensembles[:-1] + final_ensembles[len(original) - 1:]
            return dataclasses.replace(m, ensembles=ensembles).closed(last, length)

        return await self._ctx.ledger_manager.update(self.ledger_id, (md, version), close)

    async def _length_at(self, md: LedgerMetadata, entry_id: int) -> int:
        """Cumulative length up to ``entry_id`` (committed, so readable), from its header."""
        if entry_id < 0:
            return 0
        try:
            (data,) = await PendingReadOp(self._ctx, self.ledger_id, md, entry_id, entry_id, self._master_key).run()
        except BKError as exc:
            raise BKLedgerRecoveryError(f"ledger {self.ledger_id}: cannot read committed entry {entry_id}: {exc}") from exc
        hdr = verified_entry(data, self.ledger_id, entry_id)
        assert hdr is not None  # PendingReadOp only returns verified entries
        return hdr.length

    async def _recover_entries(self, md: LedgerMetadata, handle: LedgerHandle, first: int) -> None:
        ensemble = md.last_ensemble  # entries past the start live here (never in our new segments)
        e_size, wq, aq = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
        window = max(1, self._ctx.config.recovery_read_batch_size)
        reads: dict[int, _RecoveryRead] = {}
        flags = int(Flag.FENCE | Flag.HIGH_PRIORITY)
        timeout = self._ctx.config.read_timeout_s

        def on_reply(rr: _RecoveryRead, eid: int, bookie: str, status: int, resp: Response | None) -> None:
            if rr.decided.is_set():
                return
            kind = classify(status)
            if status == Status.OK:
                hdr = verified_entry(resp.body, self.ledger_id, eid) if resp is not None else None
                if hdr is None:
                    kind = ReplyKind.UNKNOWN  # a corrupt copy proves nothing either way
                else:
                    rr.data, rr.length = resp.body, hdr.length  # type: ignore[union-attr]
            if kind is ReplyKind.UNKNOWN:
                self._ctx.note_bookie_failure(bookie)
            if rr.tracker.add(kind) is not RecoveryOutcome.PENDING:
                rr.decided.set()

        def send(eid: int) -> None:
            rr = reads[eid] = _RecoveryRead(wq, aq)
            for idx in write_set(eid, e_size, wq):
                bookie = ensemble[idx]
                req = Request(Op.READ, 0, self.ledger_id, eid, flags, self._master_key)
                self._ctx.send(bookie, req, functools.partial(on_reply, rr, eid, bookie), timeout)

        next_send = eid = first
        while True:
            while next_send < eid + window:
                send(next_send)
                next_send += 1
            rr = reads.pop(eid)
            await rr.decided.wait()
            outcome = rr.tracker.outcome
            if outcome is RecoveryOutcome.UNRECOVERABLE:
                return
            if outcome is not RecoveryOutcome.RECOVERABLE:
                t = rr.tracker
                raise BKLedgerRecoveryError(
                    f"ledger {self.ledger_id}: cannot tell whether entry {eid} exists ({t.positives} positive, "
                    f"{t.negatives} negative, {t.unknowns} unknown of WQ={wq}, AQ={aq}); not closing")
            if handle._error is not None:
                raise BKLedgerRecoveryError(f"ledger {self.ledger_id}: re-writing recovered entries failed: "
                                            f"{handle._error}") from handle._error
            if not handle._try_slot():
                await handle._wait_for_slot()
            assert rr.data is not None
            handle._push_packed(eid, rr.data, rr.length)
            self.recovered_entries += 1
            eid += 1


def _mark_in_recovery(md: LedgerMetadata) -> LedgerMetadata | None:
    if md.state is LedgerState.OPEN:
        return md.with_state(LedgerState.IN_RECOVERY)
    return None  # already IN_RECOVERY (a previous attempt) or CLOSED
