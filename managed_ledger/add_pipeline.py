"""The add pipeline of a ManagedLedger: adds, their ordering and their completion.

The per-entry hot path takes no task: ``async_add_entry`` hands the entry to the current
ledger's handle with a callback (``add_entry`` parks its caller on the same callback), and the
completion updates the ledger list, the entry cache and the readers, then tells the caller.
An add that finds no free slot (``max_pending_adds``), a rollover in progress or earlier adds
waiting goes to the backlog, which one task serves in call order.

The call-order rule of this layer: an add takes its place (the fast-path slot or the backlog)
before its first checkpoint, and the ledger client takes the entry id before its own, so
positions follow the order in which the calls began.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Callable

import trio

from bookie.client.errors import BKError, BKLedgerFencedError
from managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    ManagedLedgerWriteError,
)
from managed_ledger.formats import LedgerInfo
from managed_ledger.ledger_client import LedgerHandleView
from managed_ledger.ledger_state import ManagedLedgerState, State, now_ms
from managed_ledger.position import Position
from managed_ledger.rollover import current_ledger_is_full
from quire.parked_caller import ParkedCaller

log = logging.getLogger(__name__)

_new_tuple = tuple.__new__


class LedgerWrites:
    """The add path's state of one data ledger we write: its list entry and the adds in
    flight (a rollover or close waits for them to drain)."""

    __slots__ = ("info", "inflight", "drained")

    def __init__(self, info: LedgerInfo) -> None:
        self.info = info
        self.inflight = 0
        self.drained: trio.Event | None = None


# Told the outcome of one add: (position, None) or (None, error).
AddCallback = Callable[["Position | None", "ManagedLedgerError | None"], None]


def tell_add(callback: AddCallback, pos: Position | None, err: ManagedLedgerError | None) -> None:
    try:
        callback(pos, err)
    except Exception:  # a caller's bug must not stop the completions of later adds
        log.exception("add_entry callback failed")


class QueuedAdd:
    """An add in the backlog (no slot free, or a rollover or earlier adds ahead of it)."""

    __slots__ = ("data", "callback", "epoch", "rollover", "alive")

    def __init__(self, data: bytes, callback: AddCallback, epoch: int, rollover: trio.Event | None) -> None:
        self.data = data
        self.callback = callback
        self.epoch = epoch  # the write epoch when the add began (see ManagedLedger.__init__)
        self.rollover = rollover  # the rollover in progress when it began (its ready event)
        self.alive = True  # False once answered, or dropped by its cancelled caller


class AddPipeline(ManagedLedgerState):
    def _check_writable(self) -> None:
        state = self.state
        if state is State.LEDGER_OPENED or state is State.CREATING_LEDGER or state is State.CLOSED_LEDGER:
            return
        if self.state == State.FENCED:
            raise ManagedLedgerFencedError(self.name)
        if self.state == State.CLOSED:
            raise ManagedLedgerClosedError(self.name)
        if self.state == State.TERMINATED:
            raise ManagedLedgerTerminatedError(self.name)
        if self.state == State.OPENING:
            raise ManagedLedgerError(f"{self.name}: not open yet")

    def _is_current_full(self) -> bool:
        c = self.config
        # hot path (every add): plain comparisons before the full policy
        if (
            self._reserved_entries < c.max_entries_per_ledger
            and self._reserved_size < self._max_size_bytes
            and now_ms() < self._current_created_ms + self._max_rollover_ms
        ):
            return False
        return current_ledger_is_full(
            entries=self._reserved_entries,
            size=self._reserved_size,
            created_ms=self._current_created_ms,
            now_ms=now_ms(),
            config=self.config,
            max_rollover_ms=self._max_rollover_ms,
        )

    async def add_entry(self, data: bytes) -> Position:
        """Append one entry; returns its position once the ledger client acked it.

        Positions follow the order in which calls began: the add takes its place (the
        fast-path slot or the backlog) before the first checkpoint. A caller cancelled while
        its add still waits in the backlog drops it; once sent, the add stays in flight."""
        waiter: ParkedCaller[Position] = ParkedCaller(trio.lowlevel.current_task())
        waiter.queued = self._add(data, waiter.done)
        return await waiter.wait()

    def async_add_entry(self, data: bytes, callback: AddCallback) -> None:
        """``add_entry`` without a task (Pulsar's asyncAddEntry): ``callback(position, None)``
        once stored, or ``(None, error)``. The per-entry hot path: with a slot free and no add
        waiting, the entry goes straight to the ledger client and the callback runs from its
        completion (the journal's group commit in standalone). Raises ManagedLedgerError at once
        if the managed ledger is not writable."""
        lh = self._current
        if (  # (_add's fast path, inlined: once per add)
            self.state is State.LEDGER_OPENED
            and lh is not None
            and not self._add_backlog
            and self._reserved_entries < self._max_entries
            and self._reserved_size < self._max_size_bytes
            and self._slots_free > 0
        ):
            self._slots_free -= 1
            self._dispatch_add(lh, data, callback)
        else:
            self._add(data, callback)

    def _add(self, data: bytes, callback: AddCallback) -> "QueuedAdd | None":
        lh = self._current
        if (
            self.state is State.LEDGER_OPENED
            and lh is not None
            and not self._add_backlog  # nobody waiting for a turn
            and self._reserved_entries < self._max_entries
            and self._reserved_size < self._max_size_bytes
            and self._slots_free > 0
        ):
            # fast path (the max-age rollover is the background loop's job here)
            self._slots_free -= 1
            self._dispatch_add(lh, data, callback)
            return None
        self._check_writable()
        q = QueuedAdd(data, callback, self._write_epoch,
                       self._ledger_ready if self.state is State.CREATING_LEDGER else None)
        self._add_backlog.append(q)
        if not self._backlog_running:
            assert self._nursery is not None
            self._backlog_running = True
            self._nursery.start_soon(self._run_add_backlog)
        return q

    async def _run_add_backlog(self) -> None:
        """Slow path, one task for all waiting adds, in call order: each waits for a slot and
        its turn (behind a rollover), then goes to the ledger client like a fast-path add."""
        backlog = self._add_backlog
        try:
            while backlog:
                q = backlog[0]
                try:
                    lh = await self._take_turn(q)
                except ManagedLedgerError as e:
                    backlog.popleft()
                    if q.alive:
                        # Every add queued behind this one began before its caller hears of the
                        # failure: it fails too (stored now, it would be ahead of the caller's
                        # re-send of this one), like the adds behind a failed write.
                        self._write_epoch += 1
                        q.alive = False
                        tell_add(q.callback, None, e)
                    continue
                backlog.popleft()
                if not q.alive:  # its caller was cancelled meanwhile: not written
                    self._release_slot()
                    continue
                q.alive = False
                self._dispatch_add(lh, q.data, q.callback)
        finally:
            self._backlog_running = False
            while backlog:  # cancelled: the managed ledger is closing
                q = backlog.popleft()
                if q.alive:
                    q.alive = False
                    tell_add(q.callback, None, ManagedLedgerClosedError(self.name))

    def _dispatch_add(self, lh: LedgerHandleView, data: bytes, callback: AddCallback) -> None:
        """Send one add (its slot taken) to the current ledger."""
        writes = self._current_writes  # lh's: both are set together
        assert writes is not None
        self._reserved_entries += 1
        self._reserved_size += len(data)
        writes.inflight += 1
        done = partial(self._add_done, lh, writes, data, callback)
        try:
            lh.async_add_entry(data, done)
        except BKError as e:
            done(-1, e)

    def _add_done(self, lh: LedgerHandleView, writes: LedgerWrites, data: bytes, callback: AddCallback,
                  entry_id: int, err: BKError | None) -> None:
        # release the add slot, handed straight to the first waiter if any (waiters
        # only exist while no slot is free: the deque is not touched otherwise)
        if self._slots_free or not self._slot_waiters:
            self._slots_free += 1
        else:
            self._slot_waiters.popleft().set()
        writes.inflight -= 1
        if not writes.inflight and writes.drained is not None:
            writes.drained.set()
        if err is not None:
            error: ManagedLedgerError
            if isinstance(err, BKLedgerFencedError):
                self.set_fenced(f"ledger fenced at the bookies: {err}")
                error = ManagedLedgerFencedError(f"{self.name}: fenced by another owner")
            else:
                self._write_epoch += 1  # adds queued behind this one fail too (see __init__)
                self._write_failed(lh, err)
                error = ManagedLedgerWriteError(f"{self.name}: add failed: {err}")
            error.__cause__ = err
            tell_add(callback, None, error)
            return
        ledger_id = lh.ledger_id
        pos = _new_tuple(Position, (ledger_id, entry_id))  # = Position(...), minus a Python frame
        info = writes.info
        if entry_id >= info.entries:
            info.entries = entry_id + 1
        info.size += len(data)
        self.entries_added_counter += 1
        if pos > self.last_confirmed_entry:
            self.last_confirmed_entry = pos
        if self.cursors or self._non_durable:  # nobody would read it from the cache
            self.cache.insert_new(pos, data)
        if self._readers_waiting:
            self._wake_readers()
        if entry_id == 0 or self._reserved_entries >= self._max_entries or self._reserved_size >= self._max_size_bytes:
            self._after_first_or_full(ledger_id, entry_id)
        try:  # (tell_add, inlined: once per add)
            callback(pos, None)
        except Exception:
            log.exception("add_entry callback failed")

    async def _take_turn(self, q: "QueuedAdd") -> LedgerHandleView:
        """Slow path of an add (the backlog task, one add at a time): wait for an add slot and
        a ledger to write to (behind a rollover); returns it with the slot taken. An add that
        began before a failed add (written or queued), or during a rollover that failed, fails."""
        self._check_writable()
        await self._acquire_slot()
        try:
            while True:
                self._check_writable()
                if q.epoch != self._write_epoch:
                    raise ManagedLedgerWriteError(f"{self.name}: an earlier add failed; this one, queued "
                                                  "behind it, is not written after it")
                if self._current is None:
                    if self.state == State.CREATING_LEDGER:
                        await self._ledger_ready.wait()
                        continue
                    if q.rollover is self._ledger_ready:  # began while that rollover ran
                        err = self._rollover_error
                        raise ManagedLedgerWriteError(f"{self.name}: no ledger to write to: {err}")
                    self._start_rollover()  # CLOSED_LEDGER after a failure: this add retries it
                    continue
                if self._is_current_full() and self._reserved_entries > 0:
                    self._start_rollover()
                    continue
                return self._current
        except BaseException:
            self._release_slot()
            raise

    async def _acquire_slot(self) -> None:
        if self._slots_free > 0 and not self._slot_waiters:
            self._slots_free -= 1
            return
        ev = trio.Event()
        self._slot_waiters.append(ev)  # FIFO: order among waiters is kept
        try:
            await ev.wait()
        except BaseException:
            if ev.is_set():
                self._release_slot()  # handed a slot while being cancelled: pass it on
            else:
                self._slot_waiters.remove(ev)
            raise

    def _release_slot(self) -> None:
        if self._slot_waiters:
            self._slot_waiters.popleft().set()  # hand the slot over directly
        else:
            self._slots_free += 1

    def _after_first_or_full(self, ledger_id: int, entry_id: int) -> None:
        """Rare per-add work: arm the max-age timer of a new ledger; roll a full one."""
        if entry_id == 0:
            info = self._list.by_id.get(ledger_id)
            if info is not None and not info.first_entry_ms:
                info.first_entry_ms = now_ms()
            self.rearm_background()  # arm the max-rollover-time timer of this ledger
        if (
            # size/count only here (time is the background loop's job)
            (self._reserved_entries >= self._max_entries or self._reserved_size >= self._max_size_bytes)
            and self.state == State.LEDGER_OPENED
            and self._current is not None
            and self._current.ledger_id == ledger_id
            and self._is_current_full()
        ):
            # like Pulsar, close a full ledger right away rather than on the next add
            self._start_rollover()

    def _wake_readers(self) -> None:
        if self._readers_waiting:  # no Event churn per add when nobody is tailing
            self._new_entries.set()
            self._new_entries = trio.Event()

    def _write_failed(self, lh: LedgerHandleView, error: BaseException) -> None:
        """A non-fencing add failure: the ledger is unusable, roll to a new one."""
        if self._current is lh and self.state == State.LEDGER_OPENED:
            log.warning("%s: write to ledger %d failed (%s); rolling over", self.name, lh.ledger_id, error)
            self._start_rollover()
