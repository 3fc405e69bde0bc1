"""ManagedLedger: one topic partition as an ordered list of ledgers.

The ledger list lives at ``/managed-ledgers/<name>`` and every change to it is a
compare-and-set on the version read at open; losing one means another owner took over,
and the managed ledger turns FENCED (pending and later adds fail with
ManagedLedgerFencedError). Adds are pipelined: positions follow the order in which
``add_entry`` calls began, many are in flight at once, and while a rollover creates the
next ledger the later adds wait (their callers' tasks, bounded by ``max_pending_adds``)
and are written to the new ledger in order.

The call-order rule of this layer: ``add_entry`` takes its turn (or the fast-path slot)
before its first checkpoint, and the ledger client takes the entry id before its own, so
positions follow the order in which ``add_entry`` calls began.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from enum import Enum
from typing import Any, Callable

import trio

from bookie.client.errors import BKError, BKLedgerFencedError, BKNoSuchLedgerError
from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.cursor import ManagedCursor
from managed_ledger.entry_cache import EntryCache
from managed_ledger.errors import (
    CursorNotFoundError,
    InvalidPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    ManagedLedgerWriteError,
    MetadataUnavailableError,
)
from managed_ledger.formats import LedgerInfo, ManagedLedgerInfo
from managed_ledger.ledger_client import LedgerClient, LedgerHandleView, close_quietly
from managed_ledger.ledger_list import LedgerList
from managed_ledger.ledger_list_store import LedgerListStore
from managed_ledger.position import Entry, Position
from managed_ledger.retention import ledgers_to_delete
from managed_ledger.rollover import current_ledger_is_full, jittered_max_rollover_ms
from managed_ledger.stats import internal_stats
from metadata.errors import MetadataError
from metadata.store import MetadataStore

log = logging.getLogger(__name__)

ML_ROOT = "/managed-ledgers"
_new_tuple = tuple.__new__


def now_ms() -> int:
    return int(time.time() * 1000)


class State(Enum):
    OPENING = "Opening"
    LEDGER_OPENED = "LedgerOpened"
    CREATING_LEDGER = "CreatingLedger"
    CLOSED_LEDGER = "ClosedLedger"  # the last rollover failed; the next add retries it
    TERMINATED = "Terminated"
    FENCED = "Fenced"
    CLOSED = "Closed"


class _LedgerWrites:
    """The add path's state of one data ledger we write: its list entry and the adds in
    flight (a rollover or close waits for them to drain)."""

    __slots__ = ("info", "inflight", "drained")

    def __init__(self, info: LedgerInfo) -> None:
        self.info = info
        self.inflight = 0
        self.drained: trio.Event | None = None


class ManagedLedger:
    """Created and opened by :class:`managed_ledger.factory.ManagedLedgerFactory`."""

    def __init__(self, name: str, config: ManagedLedgerConfig, store: MetadataStore, bk: LedgerClient, cache: EntryCache) -> None:
        self.name = name
        self.path = f"{ML_ROOT}/{name}"
        self.config = config
        self.store = store
        self.bk = bk
        self.cache = cache
        self.state = State.OPENING
        self._list_store = LedgerListStore(store, self.path, name)  # the list's node, CAS on every change
        self._list = LedgerList()  # the ledgers and the position arithmetic over them
        self._terminated_position: Position | None = None
        self.properties: dict[str, str] = {}
        self._current: LedgerHandleView | None = None  # writable
        self._current_created_ms = 0
        self._reserved_entries = 0  # current ledger: confirmed + in flight
        self._reserved_size = 0
        self._writes: dict[int, _LedgerWrites] = {}  # ledger id -> adds in flight on it
        self._current_writes: _LedgerWrites | None = None  # of the current ledger
        self._read_handles: dict[int, LedgerHandleView] = {}
        self.last_confirmed_entry = Position(-1, -1)
        self.entries_added_counter = 0
        self._max_rollover_ms = jittered_max_rollover_ms(config)
        # rollover limits copied out of the config: the add path reads them per entry
        self._max_entries = config.max_entries_per_ledger
        self._max_size_bytes = config.max_size_per_ledger_bytes
        self._readers_waiting = 0
        self.cursors: dict[str, "ManagedCursor"] = {}
        self._cursor_open_locks: dict[str, trio.Lock] = {}
        self._non_durable: set["ManagedCursor"] = set()
        # add ordering: a ticket per add; the holder of the turn talks to the ledger client
        self._tickets = 0
        self._turn = 0
        self._turn_waiters: dict[int, trio.Event] = {}
        self._abandoned: set[int] = set()
        # add slots: a plain counter + FIFO of waiters (trio.Semaphore's KI protection
        # costs more than the rest of the add fast path)
        self._slots_free = config.max_pending_adds
        self._slot_waiters: deque[trio.Event] = deque()
        self._ledger_ready = trio.Event()
        self._rollover_error: BaseException | None = None
        # Bumped by every failed add. An add that began before a failure and still waits for
        # its turn fails too: stored after the failed one, it would leave a hole the producer's
        # re-send cannot fill (deduplication would take the re-sent earlier message for a
        # duplicate of one already stored after it, and acknowledge it unstored).
        self._write_epoch = 0
        self._metadata_lock = trio.Lock()
        self._trim_lock = trio.Lock()
        # No trim before every durable cursor is recovered: a trim meanwhile would see only
        # the cursors recovered so far (none: "no durable cursor") and delete ledgers that a
        # cursor not yet recovered still has to read.
        self._cursors_recovered = False
        self._wake = trio.Event()  # wakes the background loop
        self._trim_requested = False
        self._new_entries = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._cancel_scope: trio.CancelScope | None = None
        self._closed_event = trio.Event()
        self.on_close: Callable[["ManagedLedger"], None] | None = None  # the factory forgets it
        self.ledgers_deleted_counter = 0
        self.last_ledger_created_ms = 0

    # ------------------------------------------------------------------ service
    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Owns the managed ledger's background tasks; started in the factory's nursery."""
        with trio.CancelScope() as scope:
            self._cancel_scope = scope
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                nursery.start_soon(self._background_loop)
                await self._closed_event.wait()
                nursery.cancel_scope.cancel()

    async def _background_loop(self) -> None:
        """Trims when asked (rollover, mark-delete moves) and periodically (retention with
        no traffic), rolls an idle ledger once it passed its maximum age, expires messages
        by ledger age when a TTL is set, and flushes a throttled (dirty) cursor position at
        most ``cursor_position_flush_seconds`` after it became dirty."""
        interval = max(self.config.retention_check_interval_seconds, 0.05)
        next_periodic = trio.current_time() + interval
        next_expiry = trio.current_time() + max(self.config.message_expiry_check_interval_seconds, 0.05)
        next_flush: float | None = None  # deadline of the oldest dirty cursor position
        while True:
            now = trio.current_time()
            deadline = next_periodic
            if self.config.message_ttl_seconds > 0:
                deadline = min(deadline, next_expiry)
            if any(c.is_dirty for c in self.cursors.values()):
                if next_flush is None:
                    next_flush = now + self.config.cursor_position_flush_seconds
                deadline = min(deadline, next_flush)
            else:
                next_flush = None
            if self._current is not None and self._list.current is not None and self._list.current.entries > 0:
                age_left = (self._current_created_ms + self._max_rollover_ms - now_ms()) / 1000
                deadline = min(deadline, now + max(age_left, 0.01))
            with trio.move_on_at(deadline):
                await self._wake.wait()
            self._wake = trio.Event()
            now = trio.current_time()
            periodic = now >= next_periodic
            if periodic:
                next_periodic = now + interval
            try:
                self._maybe_roll_idle_ledger()
                if self.config.message_ttl_seconds > 0 and now >= next_expiry:
                    next_expiry = now + max(self.config.message_expiry_check_interval_seconds, 0.05)
                    await self.expire_messages()
                if self._trim_requested or periodic:
                    self._trim_requested = False
                    await self.trim()
                if periodic or (next_flush is not None and now >= next_flush):
                    next_flush = None
                    for cursor in list(self.cursors.values()):
                        await cursor.flush_if_dirty()
            except ManagedLedgerError as e:
                if self.state in (State.FENCED, State.CLOSED):
                    return
                log.warning("%s: background task failed: %s", self.name, e)

    async def expire_messages(self, ttl_s: float | None = None) -> None:
        """Message TTL at the managed-ledger level: every durable cursor acknowledges the
        ledgers closed more than the TTL ago (no entry is read)."""
        ttl = self.config.message_ttl_seconds if ttl_s is None else ttl_s
        if ttl <= 0 or self.state in (State.CLOSED, State.FENCED):
            return
        for cursor in list(self.cursors.values()):
            if not cursor.closed:
                await cursor.expire_by_ledger_closure_time(ttl)

    def _schedule_trim(self) -> None:
        self._trim_requested = True
        self._wake.set()

    def rearm_background(self) -> None:
        """Recompute the background loop's timers (no trim, no flush now)."""
        self._wake.set()

    def _maybe_roll_idle_ledger(self) -> None:
        if (
            self.state == State.LEDGER_OPENED
            and self._list.current is not None
            and self._list.current.entries > 0
            and self._is_current_full()
            and self._turn == self._tickets  # no add waiting: adds roll on their own
        ):
            self._start_rollover()

    # ------------------------------------------------------------------ open
    async def initialize(self, create_if_missing: bool = True) -> None:
        """Open = read the list, recover (fence) the last ledger, drop empty ledgers,
        create a new ledger, CAS the list; then recover the cursors."""
        info = await self._list_store.load(create_if_missing)
        self.properties = dict(info.properties)
        ledgers = list(info.ledgers)
        if ledgers:
            last = ledgers[-1]
            try:
                lh = await self.bk.open_ledger(last.ledger_id, self.config.password, recovery=True)
            except BKNoSuchLedgerError:
                ledgers.pop()
            except BKError as e:
                raise ManagedLedgerError(f"{self.name}: recovery of ledger {last.ledger_id} failed: {e}") from e
            else:
                last.entries = lh.last_add_confirmed + 1
                last.size = lh.length
                last.timestamp_ms = now_ms()
                self._read_handles[last.ledger_id] = lh
        empty = [li.ledger_id for li in ledgers if li.entries == 0]
        ledgers = [li for li in ledgers if li.entries > 0]
        self._set_ledgers(ledgers)
        if ledgers:
            self.last_confirmed_entry = Position(ledgers[-1].ledger_id, ledgers[-1].entries - 1)
        if info.terminated_position is not None:
            self._terminated_position = Position(*info.terminated_position)
            self.state = State.TERMINATED
            await self._write_ledger_list(self._list.ledgers)
        else:
            try:
                lh = await self._create_data_ledger()
            except BKError as e:
                raise ManagedLedgerError(f"{self.name}: cannot create a ledger: {e}") from e
            new_info = LedgerInfo(lh.ledger_id)
            try:
                await self._write_ledger_list(self._list.ledgers + [new_info])
            except ManagedLedgerError:
                await self.delete_ledger_quietly(lh.ledger_id)
                raise
            self._install_current(lh, new_info)
            if not ledgers:
                self.last_confirmed_entry = Position(lh.ledger_id, -1)
            self.state = State.LEDGER_OPENED
        for ledger_id in empty:
            await self.delete_ledger_quietly(ledger_id)
        await self._recover_cursors()
        self._cursors_recovered = True

    async def _recover_cursors(self) -> None:
        try:
            names = await self.store.children(self.path)
        except MetadataError as e:
            raise MetadataUnavailableError(f"{self.name}: listing cursors: {e}") from e
        for cursor_name in names:
            cursor = ManagedCursor(self, cursor_name, durable=True)
            await cursor.recover()
            self.cursors[cursor_name] = cursor

    def _set_ledgers(self, ledgers: list[LedgerInfo]) -> None:
        self._list.set(ledgers)

    def _install_current(self, lh: LedgerHandleView, info: LedgerInfo) -> None:
        self._list.append_current(info)
        self._current = lh
        self._current_created_ms = now_ms()
        self.last_ledger_created_ms = self._current_created_ms
        self._reserved_entries = 0
        self._reserved_size = 0
        self._current_writes = self._writes[lh.ledger_id] = _LedgerWrites(info)

    async def _create_data_ledger(self) -> LedgerHandleView:
        c = self.config
        return await self.bk.create_ledger(
            c.ensemble_size,
            c.write_quorum,
            c.ack_quorum,
            password=c.password,
            custom_metadata={"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": self.name.encode()},
        )

    async def _write_ledger_list(self, ledgers: list[LedgerInfo]) -> None:
        """CAS the ledger list; a version conflict fences this managed ledger."""
        info = ManagedLedgerInfo(
            ledgers=ledgers,
            terminated_position=self._terminated_position.as_tuple() if self._terminated_position else None,
            properties=self.properties,
        )
        try:
            await self._list_store.write(info)
        except ManagedLedgerFencedError:
            self.set_fenced("z-node version mismatch")
            raise

    def set_fenced(self, why: str) -> None:
        if self.state in (State.FENCED, State.CLOSED):
            return
        log.warning("%s: fenced (%s); the owner must close it", self.name, why)
        self.state = State.FENCED
        self._ledger_ready.set()
        self._wake_readers()

    # ------------------------------------------------------------------ adds
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

    def _advance_turn(self) -> None:
        self._turn += 1
        while self._turn in self._abandoned:
            self._abandoned.discard(self._turn)
            self._turn += 1
        ev = self._turn_waiters.pop(self._turn, None)
        if ev is not None:
            ev.set()

    async def add_entry(self, data: bytes) -> Position:
        """Append one entry; returns its position once the ledger client acked it.

        Positions follow the order in which calls began: the turn is taken before the
        first checkpoint, and the ledger client assigns the entry id before its own.
        This is the per-entry hot path: one coroutine frame, bookkeeping inline."""
        lh = self._current
        if (
            self.state is State.LEDGER_OPENED
            and lh is not None
            and self._turn == self._tickets  # nobody waiting for a turn
            and self._reserved_entries < self._max_entries
            and self._reserved_size < self._max_size_bytes
            and self._slots_free > 0
        ):
            # fast path (the max-age rollover is the background loop's job here); tickets
            # and turn only order adds that wait, so with none waiting they stay equal
            self._slots_free -= 1
        else:
            lh = await self._take_turn(self._write_epoch)
        writes = self._current_writes  # lh's: both are set together, no await since lh was read
        assert writes is not None
        ledger_id = lh.ledger_id
        size = len(data)
        self._reserved_entries += 1
        self._reserved_size += size
        writes.inflight += 1
        try:
            entry_id = await lh.add_entry(data)
        except BKLedgerFencedError as e:
            self.set_fenced(f"ledger fenced at the bookies: {e}")
            raise ManagedLedgerFencedError(f"{self.name}: fenced by another owner") from e
        except BKError as e:
            self._write_epoch += 1  # adds queued behind this one fail too (see __init__)
            self._write_failed(lh, e)
            raise ManagedLedgerWriteError(f"{self.name}: add failed: {e}") from e
        finally:
            # release the add slot, handed straight to the first waiter if any (waiters
            # only exist while no slot is free: the deque is not touched otherwise)
            if self._slots_free or not self._slot_waiters:
                self._slots_free += 1
            else:
                self._slot_waiters.popleft().set()
            writes.inflight -= 1
            if not writes.inflight and writes.drained is not None:
                writes.drained.set()
        pos = _new_tuple(Position, (ledger_id, entry_id))  # = Position(...), minus a Python frame
        info = writes.info
        if entry_id >= info.entries:
            info.entries = entry_id + 1
        info.size += size
        self.entries_added_counter += 1
        if pos > self.last_confirmed_entry:
            self.last_confirmed_entry = pos
        if self.cursors or self._non_durable:  # nobody would read it from the cache
            self.cache.insert_new(pos, data)
        if self._readers_waiting:
            self._wake_readers()
        if entry_id == 0 or self._reserved_entries >= self._max_entries or self._reserved_size >= self._max_size_bytes:
            self._after_first_or_full(ledger_id, entry_id)
        return pos

    async def _take_turn(self, epoch: int) -> LedgerHandleView:
        """Slow path of add_entry: wait for an add slot and our turn (behind a rollover
        or earlier adds); returns the ledger to write to, with the turn passed on. ``epoch``:
        the write epoch when the add began; an add failed meanwhile fails this one too."""
        self._check_writable()
        await self._acquire_slot()
        ticket = self._tickets
        self._tickets += 1
        advanced = False
        try:
            if ticket != self._turn:
                ev = trio.Event()
                self._turn_waiters[ticket] = ev
                await ev.wait()
            # our turn: nobody else talks to the ledger client until we advance it
            while True:
                self._check_writable()
                if epoch != self._write_epoch:
                    raise ManagedLedgerWriteError(f"{self.name}: an earlier add failed; this one, queued "
                                                  "behind it, is not written after it")
                if self._current is None:
                    if self.state == State.CREATING_LEDGER:
                        await self._ledger_ready.wait()
                        if self._current is None and self.state == State.CLOSED_LEDGER:
                            err = self._rollover_error
                            raise ManagedLedgerWriteError(f"{self.name}: no ledger to write to: {err}")
                        continue
                    self._start_rollover()  # CLOSED_LEDGER after a failure: try again
                    continue
                if self._is_current_full() and self._reserved_entries > 0:
                    self._start_rollover()
                    continue
                break
            # The next ticket only runs once we yield: call order = entry order.
            self._advance_turn()
            advanced = True
        finally:
            if not advanced:
                if ticket == self._turn:
                    self._advance_turn()
                else:
                    self._turn_waiters.pop(ticket, None)
                    self._abandoned.add(ticket)
                self._release_slot()
        return self._current

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

    # ------------------------------------------------------------------ rollover
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
                await self._close_old_ledger(old)
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

    # ------------------------------------------------------------------ geometry
    @property
    def ledgers(self) -> list[LedgerInfo]:
        return list(self._list.ledgers)

    @property
    def current_ledger_id(self) -> int:
        return self._list.current_ledger_id

    @property
    def number_of_entries(self) -> int:
        return self._list.number_of_entries

    @property
    def total_size(self) -> int:
        return self._list.total_size

    @property
    def is_terminated(self) -> bool:
        return self._terminated_position is not None

    @property
    def is_fenced(self) -> bool:
        return self.state == State.FENCED

    # Position arithmetic lives in ledger_list.LedgerList (pure); these delegate to it.
    def first_position(self) -> Position:
        """The position just before the first stored entry (an 'earliest' mark-delete)."""
        return self._list.first_position()

    def next_valid_position(self, pos: Position) -> Position:
        return self._list.next_valid_position(pos)

    def normalize(self, pos: Position) -> Position:
        return self._list.normalize(pos)

    def previous_position(self, pos: Position) -> Position:
        return self._list.previous_position(pos)

    def count_entries_between(self, after: Position, upto: Position) -> int:
        return self._list.count_entries_between(after, upto)

    def position_at_offset(self, after: Position, offset: int) -> Position | None:
        return self._list.position_at_offset(after, offset)

    def has_position(self, pos: Position) -> bool:
        return self._list.has_position(pos)

    # ------------------------------------------------------------------ reads
    async def _read_handle(self, ledger_id: int) -> LedgerHandleView:
        if self._current is not None and self._current.ledger_id == ledger_id:
            return self._current
        lh = self._read_handles.get(ledger_id)
        if lh is None:
            lh = await self.bk.open_ledger(ledger_id, self.config.password, recovery=False)
            self._read_handles[ledger_id] = lh
        return lh

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """Entries first..last of one ledger: entry cache first, then the ledger client."""
        if self.state == State.FENCED:
            raise ManagedLedgerFencedError(self.name)
        out = self.cache.get_range(ledger_id, first, last)
        start = first + len(out)
        if start > last:
            return out
        try:
            lh = await self._read_handle(ledger_id)
            step = max(self.config.read_batch_size, 1)
            info = self._list.by_id.get(ledger_id)
            confirmed = info.entries if info is not None else 0
            while start <= last:
                end = min(last, start + step - 1)
                # The ledger list knows which entries were confirmed; a handle opened while
                # the writer had not closed the ledger yet (a rollover in progress, an owner
                # that died before closing it) may know a lower LAC: read those unconfirmed,
                # as Pulsar does.
                if lh.last_add_confirmed < end < confirmed:
                    batch = await lh.read_unconfirmed(start, end)
                else:
                    batch = await lh.read(start, end)
                for le in batch:
                    out.append(Entry(Position(ledger_id, le.entry_id), bytes(le.data)))
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

    # ------------------------------------------------------------------ cursors
    async def open_cursor(self, name: str, initial_position: str = "latest") -> "ManagedCursor":
        if self.state in (State.CLOSED, State.FENCED):
            raise (ManagedLedgerFencedError if self.state == State.FENCED else ManagedLedgerClosedError)(self.name)
        if initial_position not in ("earliest", "latest"):
            raise ValueError("initial_position must be 'latest' or 'earliest'")
        # Concurrent opens of one name must share one cursor: a second create would find
        # the node written by the first and claim it like a new owner, fencing us.
        lock = self._cursor_open_locks.setdefault(name, trio.Lock())
        async with lock:
            cursor = self.cursors.get(name)
            if cursor is not None:
                return cursor
            md = self.first_position() if initial_position == "earliest" else self.last_confirmed_entry
            cursor = ManagedCursor(self, name, durable=True)
            await cursor.create(md)
            self.cursors[name] = cursor
        if not lock.locked() and not lock.statistics().tasks_waiting:
            self._cursor_open_locks.pop(name, None)
        return cursor

    def open_non_durable_cursor(self, start: Position | None = None, inclusive: bool = True, name: str = "") -> "ManagedCursor":
        """A reader's cursor: never persisted, ignored by trimming, moved forward by it.

        `start` None means the latest position; Position(-1, -1) the earliest."""
        if start is None:
            md = self.last_confirmed_entry
        elif start.ledger_id < 0 or (self._list.ledgers and start < Position(self._list.ledgers[0].ledger_id, 0)):
            md = self.first_position()
        elif inclusive:
            md = self.previous_position(start)
        else:
            md = start
        cursor = ManagedCursor(self, name or f"reader-{id(self):x}-{len(self._non_durable)}", durable=False)
        if md > self.last_confirmed_entry:
            md = self.last_confirmed_entry
        cursor.init_position(md)
        self._non_durable.add(cursor)
        return cursor

    async def delete_cursor(self, name: str) -> None:
        cursor = self.cursors.pop(name, None)
        if cursor is None:
            raise CursorNotFoundError(f"{self.name}/{name}")
        await cursor.delete_persistent_state()
        self._schedule_trim()

    def _all_cursors(self) -> list["ManagedCursor"]:
        return list(self.cursors.values()) + list(self._non_durable)

    # Package-level calls the cursors make (not part of the broker's API).

    @property
    def non_durable_cursors(self) -> set["ManagedCursor"]:
        return self._non_durable

    def forget_non_durable(self, cursor: "ManagedCursor") -> None:
        """A non-durable cursor closed."""
        self._non_durable.discard(cursor)

    def ledger_info(self, ledger_id: int) -> LedgerInfo | None:
        return self._list.by_id.get(ledger_id)

    # For internal stats.

    @property
    def current_ledger_info(self) -> LedgerInfo | None:
        return self._list.current

    @property
    def pending_add_entries(self) -> int:
        """Adds waiting for a turn plus adds in flight on any ledger."""
        return self._tickets - self._turn + sum(w.inflight for w in self._writes.values())

    def cursor_moved(self, cursor: "ManagedCursor", old_md: Position) -> None:
        """A mark-delete moved: trim if the slowest durable cursor changed ledger, and drop
        cache entries every active cursor has read."""
        if cursor.durable and old_md.ledger_id != cursor.mark_delete_position.ledger_id:
            self._schedule_trim()
        self.invalidate_cache()

    def invalidate_cache(self) -> None:
        cursors = [c for c in self._all_cursors() if not c.closed]
        if cursors:
            self.cache.invalidate_before(min(c.read_position for c in cursors))

    def _slowest_durable_mark_delete(self) -> Position | None:
        durable = [c.mark_delete_position for c in self.cursors.values()]
        return min(durable) if durable else None

    # ------------------------------------------------------------------ trimming
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
            log.info("%s: trimmed ledgers %s", self.name, sorted(doomed_ids))
            return sorted(doomed_ids)

    def set_config(self, **changes: Any) -> None:
        """Change settings at runtime (retention, TTL, rollover); retention applies at the
        next trim, which is scheduled now."""
        self.config = self.config.replace(**changes)
        self._max_entries = self.config.max_entries_per_ledger
        self._max_size_bytes = self.config.max_size_per_ledger_bytes
        if any(k.startswith("maximum_rollover") for k in changes):
            self._max_rollover_ms = jittered_max_rollover_ms(self.config, random.Random())
        self._schedule_trim()

    # ------------------------------------------------------------------ terminate / close
    async def terminate(self) -> Position:
        """No more adds: wait for in-flight ones, record the terminated position."""
        if self.state == State.TERMINATED:
            assert self._terminated_position is not None
            return self._terminated_position
        self._check_writable()
        self.state = State.TERMINATED
        self._ledger_ready.set()
        if self._current is not None:
            await self._wait_drained(self._current.ledger_id)
        self._terminated_position = self.last_confirmed_entry
        async with self._metadata_lock:
            await self._write_ledger_list(self._list.ledgers)
        if self._current is not None:
            lh, self._current = self._current, None
            await self._close_old_ledger(lh)
        self._wake_readers()
        return self._terminated_position

    @property
    def terminated_position(self) -> Position | None:
        return self._terminated_position

    async def close(self) -> None:
        """Persist cursors, close the current ledger, stop background tasks."""
        if self.state == State.CLOSED:
            return
        was_fenced = self.state == State.FENCED
        if self._current is not None:
            with trio.move_on_after(10):
                await self._wait_drained(self._current.ledger_id)
        self.state = State.CLOSED
        self._ledger_ready.set()
        for cursor in self._all_cursors():
            try:
                await cursor.shutdown(persist=not was_fenced)
            except ManagedLedgerError as e:
                log.warning("%s: closing cursor %s: %s", self.name, cursor.name, e)
        if self._current is not None and not was_fenced:
            await self._close_old_ledger(self._current)
        for lh in self._read_handles.values():
            await close_quietly(lh, log, self.name)
        self._read_handles.clear()
        self._current = None
        self.cache.clear()
        self._wake_readers()
        self._closed_event.set()
        if self.on_close is not None:
            self.on_close(self)

    # ------------------------------------------------------------------ stats
    def internal_stats(self) -> dict[str, Any]:
        return internal_stats(self)
