"""``LedgerHandle``: the writer (and reader) of one ledger.

Write path (BookKeeper's ``LedgerHandle`` + ``PendingAddOp``): entry ids are assigned in call
order. The call-order rule (the same in every layer): ``add_entry`` takes its id synchronously,
before its first checkpoint (await), so concurrent callers get ids in the order their calls
began. Each entry is packed once (digest header with the current LAC piggybacked) and the same
bytes go to the WQ bookies of its write set; an entry completes once AQ bookies acked it *and*
every earlier entry completed, which advances the LAC. At most ``throttle`` adds are in flight.
Per entry the hot path allocates one small record and one frame per bookie: acks are a bit
mask and a counter, the window is a counter (a FIFO only when it is full), and completion is
a callback (``async_add_entry``: no task per entry; ``add_entry`` parks its caller on it).

A bookie that fails an add (error, timeout, lost connection; anything but FENCED or
UNAUTHORIZED) triggers an *ensemble change*: it is replaced by another writable bookie, a new
segment starting at LAC+1 is compare-and-set into the metadata, and the pending adds are
resent to the replacements. Completions are held while the change is in progress so that the
LAC the segment is keyed on cannot move. FENCED, or metadata found IN_RECOVERY/CLOSED, fails
the handle: another client has taken the ledger over.

The recovery op drives the same machinery with pre-packed entries and the RECOVERY_ADD flag.
"""

from __future__ import annotations

import collections
from functools import partial
from typing import TYPE_CHECKING, Callable

import trio

from bookie import entry_format
from bookie.client.distribution import write_set
from bookie.client.errors import (
    BKClientClosedError,
    BKError,
    BKIllegalOpError,
    BKLedgerClosedError,
    BKLedgerFencedError,
    BKMetadataVersionError,
    BKNoSuchEntryError,
    BKNotEnoughBookiesError,
    BKUnauthorizedAccessError,
)
from bookie.client.ledger_metadata import LedgerMetadata, LedgerState
from bookie.client.read_ops import long_poll_lac, read_entries, read_lac
from bookie.protocol import Flag, Status
from quire import hop_trace, invariants
from quire.lazy_event import LazyEvent
from quire.parked_caller import ParkedCaller

if TYPE_CHECKING:
    from bookie.client.bookie_connection import BookieConnection
    from bookie.client.client_context import ClientContext
    from bookie.client.local_bookie import LocalBookieConnection

__all__ = ["LedgerHandle", "LedgerEntry"]


class LedgerEntry:
    """One entry read back: its ids and the payload the writer added."""

    __slots__ = ("ledger_id", "entry_id", "data")

    def __init__(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.data = data

    def __repr__(self) -> str:
        return f"LedgerEntry({self.ledger_id}, {self.entry_id}, {len(self.data)} bytes)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LedgerEntry) and (self.ledger_id, self.entry_id, self.data) == (
            other.ledger_id, other.entry_id, other.data)


# Entries per range read from bookies that all run in this process: the bookie's own cap on
# one range read (it answers at most 10,000 entries, about 4 MiB; read_entries asks on for
# the rest of a shorter answer).
LOCAL_READ_BATCH = 10_000
_OK = int(Status.OK)
_FENCED = int(Status.FENCED)
_UNAUTHORIZED = int(Status.UNAUTHORIZED)


# Told the outcome of one add: (entry_id, None) once it and every earlier entry are
# AQ-acked, or (-1, error). Runs from the reply path (a journal group commit, a socket
# reader), or within ``async_add_entry`` itself if the handle fails there.
AddCallback = Callable[[int, "BKError | None"], None]


class _PendingAdd:
    __slots__ = ("entry_id", "data", "length", "sent_to", "acked", "ack_count", "callback", "error", "completed")

    def __init__(self, entry_id: int, data: bytes, length: int, callback: AddCallback | None) -> None:
        self.entry_id = entry_id
        self.data = data  # packed once, shared by every bookie of the write set
        self.length = length  # cumulative ledger length including this entry
        # The ensemble (list) its write set was last sent to; None = not sent yet. A reply
        # counts only if sent_to[idx] is still the bookie that sent it.
        self.sent_to: list[str] | None = None
        self.acked = 0  # bit mask of ensemble indices that acked
        self.ack_count = 0
        self.callback = callback
        self.error: BKError | None = None
        self.completed = False

    def finish(self) -> None:
        self.completed = True
        cb = self.callback
        if cb is not None:
            self.callback = None
            err = self.error
            cb(-1 if err is not None else self.entry_id, err)


class _QueuedAdd:
    """An add waiting for a window slot (its entry id is taken when it gets one, in order)."""

    __slots__ = ("payload", "callback", "alive")

    def __init__(self, payload: bytes, callback: AddCallback) -> None:
        self.payload = payload
        self.callback = callback
        self.alive = True  # False: its caller was cancelled before it got a slot


class _SlotWaiter:
    """Recovery's turn for a window slot: a parked task, counted in when woken."""

    __slots__ = ("task",)

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task: trio.lowlevel.Task | None = task


class LedgerHandle:
    """Handle on one ledger. Writable if created by this client; read-only if opened."""

    def __init__(self, ctx: "ClientContext", ledger_id: int, md: LedgerMetadata, version: int, *,
                 master_key: bytes, writable: bool, recovery: bool = False) -> None:
        self._ctx = ctx
        self.ledger_id = ledger_id
        self._md = md
        self._version = version
        self._master_key = master_key
        self._writable = writable
        self._add_flags = int(Flag.RECOVERY_ADD) if recovery else 0
        self._recovery = recovery
        if md.is_closed:
            self._lac, self._length = md.last_entry_id, md.length
        else:
            self._lac, self._length = -1, 0
        self._next_entry_id = self._lac + 1
        self._pushed_length = self._length
        self._ensemble = list(md.last_ensemble)
        self._write_sets = [write_set(i, md.ensemble_size, md.write_quorum_size) for i in range(md.ensemble_size)]
        self._ack_quorum = md.ack_quorum_size
        self._timeout_s = ctx.config.add_entry_timeout_s
        self._conns: dict[str, "BookieConnection | LocalBookieConnection"] = {}  # the pool's connections, looked up once
        self._pending: collections.deque[_PendingAdd] = collections.deque()
        # Window of adds in flight: a counter, and a FIFO of adds (and recovery's parked task)
        # waiting for a slot only while it is full. A freed slot goes to the oldest waiter at
        # once (a queued add takes its entry id then), so ids stay in call order.
        self._throttle = max(1, ctx.config.throttle)
        self._in_flight = 0
        self._waiting: collections.deque[_QueuedAdd | _SlotWaiter] = collections.deque()
        self._failed_bookies: dict[int, str] = {}
        # Bookies that failed this handle are never chosen again as its replacements: that
        # bounds ensemble-change churn when bookies are down (then BKNotEnoughBookiesError).
        self._ever_failed: set[str] = set()
        self._changing_ensemble = False
        self._error: BKError | None = None
        self._closing = False
        self._closed = md.is_closed and not writable
        # Set when the LAC advances (or the handle fails): no Event per add.
        self._lac_advanced = LazyEvent()

    # -- properties (contract) ---------------------------------------------------------------

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._length

    @property
    def metadata(self) -> LedgerMetadata:
        return self._md

    @property
    def is_closed(self) -> bool:
        return self._closed or self._md.is_closed

    @property
    def last_add_pushed(self) -> int:
        return self._next_entry_id - 1

    # -- add ---------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        err = self._writable_error()
        if err is not None:
            raise err

    def _writable_error(self) -> BKError | None:
        if not self._writable:
            return BKIllegalOpError(f"ledger {self.ledger_id} was opened read-only")
        if self._error is not None:
            return type(self._error)(str(self._error))
        if self._closing or self._closed:
            return BKLedgerClosedError(f"ledger {self.ledger_id} is closed")
        return None

    async def add_entry(self, data: bytes) -> int:
        """Append ``data``; returns its entry id once it and all earlier entries are AQ-acked.

        The call-order rule: the entry takes its place (its id, or its place in the window's
        queue) synchronously, before the first checkpoint, so ids follow the order calls began."""
        waiter: ParkedCaller[int] = ParkedCaller(trio.lowlevel.current_task())
        waiter.queued = self._add(data, waiter.done)
        return await waiter.wait()

    def async_add_entry(self, data: bytes, callback: AddCallback) -> None:
        """Append ``data``; ``callback(entry_id, error)`` tells the outcome (the hot path: no
        task, no await). The id is taken in call order, as with ``add_entry``; raises BKError
        at once if the handle cannot write."""
        if (self._in_flight < self._throttle and not self._waiting and self._writable and self._error is None
                and not (self._closing or self._closed)):
            self._in_flight += 1  # (_add's fast path, inlined: once per add)
            self._push(data, callback)
        else:
            self._add(data, callback)

    def _add(self, data: bytes, callback: AddCallback) -> _QueuedAdd | None:
        if not self._writable or self._error is not None or self._closing or self._closed:
            self._check_writable()  # (the raise; the common case tested inline)
        if self._in_flight < self._throttle and not self._waiting:
            self._in_flight += 1
            self._push(data, callback)
            return None
        q = _QueuedAdd(data, callback)
        self._waiting.append(q)
        return q

    def _try_slot(self) -> bool:
        """Take a window slot if one is free and nobody is queued for one."""
        if self._in_flight < self._throttle and not self._waiting:
            self._in_flight += 1
            return True
        return False

    async def _wait_for_slot(self) -> None:
        """Queue for a window slot (recovery); it is counted for us when we are woken."""
        w = _SlotWaiter(trio.lowlevel.current_task())

        def abort(_: object) -> trio.lowlevel.Abort:
            w.task = None
            return trio.lowlevel.Abort.SUCCEEDED

        self._waiting.append(w)
        await trio.lowlevel.wait_task_rescheduled(abort)

    def _admit(self) -> None:
        """Hand free window slots to the waiters, oldest first."""
        waiting = self._waiting
        while waiting and self._in_flight < self._throttle:
            w = waiting.popleft()
            if isinstance(w, _SlotWaiter):
                if w.task is not None:
                    self._in_flight += 1
                    task, w.task = w.task, None
                    trio.lowlevel.reschedule(task)
                continue
            if not w.alive:
                continue
            w.alive = False
            err = self._writable_error()
            if err is not None:
                w.callback(-1, err)
                continue
            self._in_flight += 1
            self._push(w.payload, w.callback)

    def _release_slots(self, n: int) -> None:
        self._in_flight -= n
        if self._waiting:
            self._admit()

    def _push(self, payload: bytes, callback: AddCallback) -> _PendingAdd:
        eid = self._next_entry_id
        self._next_entry_id = eid + 1
        self._pushed_length += len(payload)
        if hop_trace.ENABLED:
            hop_trace.mark("b.push", self.ledger_id << 32 | eid)
        packed = entry_format.pack_entry(self.ledger_id, eid, self._lac, self._pushed_length, payload)
        return self._enqueue(_PendingAdd(eid, packed, self._pushed_length, callback))

    def _push_packed(self, entry_id: int, packed: bytes, length: int) -> _PendingAdd:
        """Recovery: re-add an entry read back, byte for byte, under its original id."""
        if entry_id != self._next_entry_id:
            raise BKIllegalOpError(f"recovery add of {entry_id} but next entry is {self._next_entry_id}")
        self._next_entry_id = entry_id + 1
        self._pushed_length = length
        return self._enqueue(_PendingAdd(entry_id, packed, length, None))

    def _enqueue(self, op: _PendingAdd) -> _PendingAdd:
        self._pending.append(op)
        if not self._changing_ensemble:
            ensemble = self._ensemble
            op.sent_to = ensemble
            conns = self._conns
            for idx in self._write_sets[op.entry_id % len(ensemble)]:
                # (_send_add, inlined: once per add and bookie)
                bookie = ensemble[idx]
                conn = conns.get(bookie)
                if conn is None:
                    conn = conns[bookie] = self._ctx.connection(bookie)
                conn.send_add(self.ledger_id, op.entry_id, self._add_flags, self._master_key, op.data,
                              partial(self._on_add_reply, op, idx, bookie), self._timeout_s)
        return op

    def _send_add(self, op: _PendingAdd, idx: int, bookie: str) -> None:
        conn = self._conns.get(bookie)
        if conn is None:
            conn = self._conns[bookie] = self._ctx.connection(bookie)
        # partial, not a lambda: the reply calls straight into _on_add_reply (no extra frame)
        conn.send_add(self.ledger_id, op.entry_id, self._add_flags, self._master_key, op.data,
                      partial(self._on_add_reply, op, idx, bookie), self._timeout_s)

    def _on_add_reply(self, op: _PendingAdd, idx: int, bookie: str, status: int, _resp: object = None) -> None:
        if op.completed or op.sent_to[idx] != bookie:  # type: ignore[index]
            return  # already done, or this index was re-sent to a replacement meanwhile
        if status == _OK:
            bit = 1 << idx
            if not op.acked & bit:
                op.acked |= bit
                op.ack_count += 1
                if op.ack_count >= self._ack_quorum and op is self._pending[0]:
                    self._complete_in_order()
        elif status == _FENCED:
            self._fail(BKLedgerFencedError(f"ledger {self.ledger_id} was fenced by another client ({bookie})"))
        elif status == _UNAUTHORIZED:
            self._fail(BKUnauthorizedAccessError(f"bookie {bookie} refused the master key of ledger {self.ledger_id}"))
        else:
            self._ctx.note_bookie_failure(bookie)
            if self._ensemble[idx] == bookie and self._error is None:
                self._failed_bookies[idx] = bookie
                self._start_ensemble_change()

    def _complete_in_order(self) -> None:
        if self._changing_ensemble:
            return  # the new segment is keyed on LAC+1: keep LAC still until the change is in
        aq = self._ack_quorum
        pending = self._pending
        n = 0
        op = None
        while pending and pending[0].ack_count >= aq:
            op = pending.popleft()
            if hop_trace.ENABLED:
                hop_trace.mark("b.aq", self.ledger_id << 32 | op.entry_id)
            if invariants.ENABLED and (op.entry_id != self._lac + n + 1 or self._error is not None):
                # ids are acknowledged contiguously, and never once the handle failed (fenced)
                invariants.violated(f"ledger {self.ledger_id}: acknowledging entry {op.entry_id} "
                                    f"after {self._lac + n} (handle error: {self._error!r})")
            op.completed = True  # (op.finish, inlined: an op still pending has no error)
            cb = op.callback
            if cb is not None:
                op.callback = None
                cb(op.entry_id, None)
            n += 1
        if op is not None:
            self._lac = op.entry_id
            self._length = op.length
            self._in_flight -= n  # (_release_slots, inlined)
            if self._waiting:
                self._admit()
            self._lac_advanced.set()

    def _fail(self, error: BKError) -> None:
        """The handle can no longer write: fail every pending add with ``error``."""
        if self._error is None:
            self._error = error
        pending, self._pending = self._pending, collections.deque()
        for op in pending:
            op.error = error
            op.finish()
        self._release_slots(len(pending))  # queued adds fail in call order, after these
        # wake parked callers: they find the handle failed (and their slot handed over)
        self._lac_advanced.set()

    # -- ensemble change ---------------------------------------------------------------------

    def _start_ensemble_change(self) -> None:
        if self._ctx.closed:
            self._fail(BKClientClosedError(f"ledger {self.ledger_id}: the BookKeeper client was closed"))
            return
        if not self._changing_ensemble:
            self._changing_ensemble = True
            self._ctx.spawn(self._ensemble_change_loop)

    async def _ensemble_change_loop(self) -> None:
        try:
            while self._failed_bookies and self._error is None:
                failed, self._failed_bookies = self._failed_bookies, {}
                # Failures that arrived while the previous round ran may name a bookie it has
                # already replaced: replacing "it" again would evict the healthy replacement.
                failed = {idx: b for idx, b in failed.items() if self._ensemble[idx] == b}
                if failed:
                    await self._change_ensemble(failed)
                    self._resend_to_replacements()
        except BKError as exc:
            self._fail(exc)
        finally:
            self._changing_ensemble = False
        if self._error is None and self._pending:
            self._complete_in_order()

    async def _change_ensemble(self, failed: dict[int, str]) -> None:
        new_ensemble = list(self._ensemble)
        writable = await self._ctx.writable_bookies()
        await self._ctx.refresh_racks()
        self._ever_failed.update(failed.values())
        exclude = set(self._ever_failed)
        quarantined = self._ctx.quarantined()
        for idx in failed:
            pick = self._ctx.placement.replace_bookie(new_ensemble, idx, writable, exclude, quarantined)
            if pick in new_ensemble or pick in exclude:
                raise BKNotEnoughBookiesError(f"placement offered {pick} to replace {failed[idx]} in {new_ensemble}")
            new_ensemble[idx] = pick
        first = self._lac + 1
        if self._recovery:
            # Recovery keeps its ensemble changes local and writes them with the final CLOSED
            # state in one CAS. Persisting a segment now would claim that entries > LAC live on
            # the replacement before they were re-written there; if this attempt then aborted,
            # the next one would read NO_ENTRY from the replacement and truncate acked entries.
            self._md = self._md.with_ensemble(first, tuple(new_ensemble))
            self._ensemble = new_ensemble
            return
        expected = self._md
        allowed = (LedgerState.OPEN,)

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            if md.state is LedgerState.CLOSED:
                raise BKLedgerClosedError(f"ledger {self.ledger_id} was closed by another client")
            if md.state not in allowed:
                raise BKLedgerFencedError(f"ledger {self.ledger_id} is being recovered by another client")
            # Auto-recovery may have re-replicated an earlier segment (kept); the last is ours.
            if not md.same_tail(expected):
                raise BKMetadataVersionError(f"ledger {self.ledger_id}: ensembles changed by another client")
            return md.with_ensemble(first, tuple(new_ensemble))

        self._md, self._version = await self._ctx.ledger_manager.update(self.ledger_id, (self._md, self._version), transform)
        self._ensemble = new_ensemble

    def _resend_to_replacements(self) -> None:
        ensemble = self._ensemble
        for op in list(self._pending):
            old = op.sent_to
            op.sent_to = ensemble
            for idx in self._write_sets[op.entry_id % len(ensemble)]:
                if old is None or old[idx] != ensemble[idx]:
                    bit = 1 << idx
                    if op.acked & bit:  # acked by the replaced bookie: the replacement must ack
                        op.acked &= ~bit
                        op.ack_count -= 1
                    self._send_add(op, idx, ensemble[idx])

    # -- close ---------------------------------------------------------------------------------

    async def _drain(self) -> None:
        while self._pending and self._error is None:
            await self._lac_advanced.wait()

    async def close(self) -> None:
        """Wait for pending adds, then CAS the metadata to CLOSED at the LAC.

        A conflict with an identical close is success; any other conflict (someone recovered
        the ledger to a different end) raises BKMetadataVersionError.
        """
        if self._closed:
            return
        if not self._writable:
            self._closed = True
            return
        self._closing = True
        try:
            await self._drain()
            await self._close_metadata(self._lac, self._length)
        finally:
            self._closed = True
            if self._error is None:
                self._error = BKLedgerClosedError(f"ledger {self.ledger_id} is closed")
            self._fail(self._error)

    async def _close_metadata(self, last_entry_id: int, length: int) -> None:
        allowed = (LedgerState.OPEN, LedgerState.IN_RECOVERY) if self._recovery else (LedgerState.OPEN,)

        def transform(md: LedgerMetadata) -> LedgerMetadata | None:
            if md.state is LedgerState.CLOSED:
                if md.last_entry_id == last_entry_id and md.length == length:
                    return None
                raise BKMetadataVersionError(
                    f"ledger {self.ledger_id} was closed by another client at {md.last_entry_id} "
                    f"(length {md.length}), not {last_entry_id} ({length}): another client may have recovered it")
            if md.state not in allowed:
                raise BKMetadataVersionError(f"ledger {self.ledger_id} is being recovered by another client")
            return md.closed(last_entry_id, length)

        self._md, self._version = await self._ctx.ledger_manager.update(self.ledger_id, (self._md, self._version), transform)

    # -- reads ---------------------------------------------------------------------------------

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` (inclusive), each digest-verified; ``last`` <= LAC."""
        if first < 0 or last < first:
            raise BKNoSuchEntryError(f"bad range {first}..{last}")
        if last > self._lac:
            raise BKNoSuchEntryError(
                f"ledger {self.ledger_id}: entry {last} is beyond the last add confirmed ({self._lac})")
        return await self.read_unconfirmed(first, last)

    async def read_unconfirmed(self, first: int, last: int) -> list[LedgerEntry]:
        """Like read() but without the LAC bound (the entries may not be committed)."""
        lid = self.ledger_id
        return [LedgerEntry(lid, e, d) for e, d in enumerate(await self.read_payloads(first, last, unconfirmed=True), first)]

    async def read_payloads(self, first: int, last: int, unconfirmed: bool = False) -> list[bytes]:
        """The payloads of entries ``first..last``, checked as read() checks them, without an
        entry object each: for a reader that knows their positions (the managed ledger's
        catch-up reads). ``unconfirmed``: no LAC bound, as read_unconfirmed()."""
        # one copy each: d may view a larger buffer (a run read from an entry log, a reply)
        hs = entry_format.HEADER_SIZE
        return [d[hs:].tobytes() if type(d) is memoryview else bytes(memoryview(d)[hs:])
                for d in await self._read_raw(first, last, unconfirmed)]

    async def read_payload_views(self, first: int, last: int, unconfirmed: bool = False) -> list[memoryview]:
        """:meth:`read_payloads` without the copy: views that may hold a whole reply's buffer
        alive, for a reader that consumes them at once (the Spark connector's direct read)."""
        hs = entry_format.HEADER_SIZE
        return [memoryview(d)[hs:] for d in await self._read_raw(first, last, unconfirmed)]

    async def _read_raw(self, first: int, last: int, unconfirmed: bool) -> list[bytes]:
        """The verified entries ``first..last`` (headers included) as the bookies sent them."""
        if not unconfirmed:
            if first < 0 or last < first:
                raise BKNoSuchEntryError(f"bad range {first}..{last}")
            if last > self._lac:
                raise BKNoSuchEntryError(
                    f"ledger {self.ledger_id}: entry {last} is beyond the last add confirmed ({self._lac})")
        out: list[bytes] = []
        step = max(1, self._ctx.config.max_entries_per_read_batch)
        local = self._ctx.local_bookies
        if local and all(b in local for _, ensemble in self._md.ensembles for b in ensemble):
            # in-process bookies (standalone): no frame to bound, and each request costs a
            # trip to the bookie's disk thread and back (thread wake-ups, GIL hand-overs)
            step = max(step, LOCAL_READ_BATCH)
        lo = first
        while lo <= last:
            hi = min(last, lo + step - 1)
            out += await read_entries(self._ctx, self.ledger_id, self._md, lo, hi, self._master_key)
            lo = hi + 1
        return out

    async def read_last_add_confirmed(self) -> int:
        """The LAC: local for the writer or a closed ledger, else asked from the bookies."""
        if self._writable or self.is_closed:
            return self._lac
        try:
            res = await read_lac(self._ctx, self.ledger_id, self._md, fence=False, master_key=self._master_key)
        except BKError:
            # e.g. the last ensemble we know was replaced by the writer: look again
            await self._refresh_metadata()
            if self.is_closed:
                return self._lac
            res = await read_lac(self._ctx, self.ledger_id, self._md, fence=False, master_key=self._master_key)
        self._lac = max(self._lac, res.lac)
        return self._lac

    async def _refresh_metadata(self) -> None:
        """Readers: pick up the writer's ensemble changes and its close (BookKeeper's readers
        watch the node; a tailing reader re-reads it whenever a poll brings nothing new)."""
        md, version = await self._ctx.ledger_manager.read(self.ledger_id)
        self._md, self._version = md, version
        if md.is_closed:
            self._lac, self._length = md.last_entry_id, md.length

    async def wait_for_last_add_confirmed(self, previous_lac: int, timeout_s: float) -> int:
        """Long poll: return once the LAC is above ``previous_lac`` (or after ``timeout_s``)."""
        if self._lac > previous_lac or self.is_closed:
            return self._lac
        if self._writable:
            with trio.move_on_after(timeout_s):
                while self._lac <= previous_lac and self._error is None:
                    await self._lac_advanced.wait()
            return self._lac
        lac = await long_poll_lac(self._ctx, self.ledger_id, self._md, previous_lac, timeout_s)
        self._lac = max(self._lac, lac)
        if self._lac <= previous_lac:
            await self._refresh_metadata()  # closed meanwhile, or now written elsewhere
        return self._lac

    def _set_recovered(self, lac: int, length: int) -> None:
        """Recovery: start writing after the entries known committed."""
        self._lac = lac
        self._length = self._pushed_length = length
        self._next_entry_id = lac + 1

    def __repr__(self) -> str:
        return f"LedgerHandle({self.ledger_id}, lac={self._lac}, state={self._md.state.value})"
