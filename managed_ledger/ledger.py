"""ManagedLedger: one topic partition as an ordered list of ledgers.

The ledger list lives at ``/managed-ledgers/<name>`` and every change to it is a
compare-and-set on the version read at open; losing one means another owner took over,
and the managed ledger turns FENCED (pending and later adds fail with
ManagedLedgerFencedError). Adds are pipelined: positions follow the order in which
``add_entry``/``async_add_entry`` calls began, many are in flight at once, and while a
rollover creates the next ledger the later adds wait in a backlog (bounded by
``max_pending_adds``) and are written to the new ledger in order.

This module holds the class, its open/recovery, cursors, background loop and close; its
jobs live beside it, one module each: ``add_pipeline`` (adds), ``ledger_rollover``,
``ledger_reads``, ``ledger_trimming``; ``ledger_state`` declares what they share.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from typing import Any, Callable

import trio

from bookie.client.errors import BKError, BKNoSuchLedgerError
from managed_ledger.add_pipeline import AddPipeline, LedgerWrites, QueuedAdd
from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.cursor import ManagedCursor
from managed_ledger.entry_cache import EntryCache
from managed_ledger.errors import (
    CursorNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    MetadataUnavailableError,
)
from managed_ledger.formats import LedgerInfo, ManagedLedgerInfo
from managed_ledger.ledger_client import LedgerClient, LedgerHandleView, close_quietly
from managed_ledger.ledger_list import LedgerList
from managed_ledger.ledger_list_store import LedgerListStore
from managed_ledger.ledger_reads import LedgerReads
from managed_ledger.ledger_rollover import LedgerRollover
from managed_ledger.ledger_state import ML_ROOT, State, now_ms
from managed_ledger.ledger_trimming import LedgerTrimming
from managed_ledger.position import Position
from managed_ledger.rollover import jittered_max_rollover_ms
from managed_ledger.stats import internal_stats
from metadata.errors import MetadataError
from metadata.store import MetadataStore

log = logging.getLogger(__name__)

class ManagedLedger(AddPipeline, LedgerRollover, LedgerReads, LedgerTrimming):
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
        self._writes: dict[int, LedgerWrites] = {}  # ledger id -> adds in flight on it
        self._current_writes: LedgerWrites | None = None  # of the current ledger
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
        # adds that found no free slot or a turn taken: served in call order by one task
        self._add_backlog: deque[QueuedAdd] = deque()
        self._backlog_running = False
        # add slots: a plain counter + FIFO of waiters (trio.Semaphore's KI protection
        # costs more than the rest of the add fast path)
        self._slots_free = config.max_pending_adds
        self._slot_waiters: deque[trio.Event] = deque()
        self._ledger_ready = trio.Event()
        self._rollover_error: BaseException | None = None
        # Bumped by every failed add (a failed write, or a queued add that found no ledger to
        # write to). An add that began before a failure and still waits for its turn fails too:
        # stored after the failed one, it would leave a hole the producer's re-send cannot fill
        # (deduplication would take the re-sent earlier message for a duplicate of one already
        # stored after it, and acknowledge it unstored).
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
        self._closing = False
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
        """Adds waiting in the backlog plus adds in flight on any ledger."""
        return len(self._add_backlog) + sum(w.inflight for w in self._writes.values())

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

    @property
    def closing(self) -> bool:
        """A close has started (or ended): the factory opens a new instance instead."""
        return self._closing or self.state == State.CLOSED

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    async def close(self) -> None:
        """Persist cursors, close the current ledger, stop background tasks. A second caller
        waits for the first one's close. Cut short (cancelled), the close still ends with the
        ledger CLOSED and forgotten by the factory, so the next open recovers a new instance
        instead of getting this one (a chaos run's topic stayed unloadable for 25 minutes)."""
        if self.closing:
            await self._closed_event.wait()
            return
        self._closing = True
        try:
            await self._close_parts()
        finally:
            self.state = State.CLOSED
            self._ledger_ready.set()
            self._wake_readers()
            self._closed_event.set()
            if self.on_close is not None:
                self.on_close(self)

    async def _close_parts(self) -> None:
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

    # ------------------------------------------------------------------ stats
    def internal_stats(self) -> dict[str, Any]:
        return internal_stats(self)
