"""ManagedCursor: a subscription's (durable) or a reader's (non-durable) place in a ledger.

State: the mark-delete position (everything at or before it is acknowledged), the
individually deleted ranges above it (collapsing into the mark-delete when they touch it),
per-entry batch-index ack sets and the mark-delete properties. This module holds that state
and its rules; a durable cursor persists snapshots of it through its ``CursorStore``
(``cursor_store.py``: the cursor ledger and the metadata node). A state change bumps a
generation; flushes (throttled by ``throttle_mark_delete``, else the background loop) persist
the newest. Only ``max_unacked_ranges_to_persist`` ranges are persisted; the loss is logged
and counted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import trio

from managed_ledger.ack_set import AckSet
from managed_ledger.cursor_store import CursorStore
from managed_ledger.cursor_store import now_ms as _now_ms
from managed_ledger.errors import (
    InvalidPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from managed_ledger.formats import PositionInfo
from managed_ledger.position import Entry, Position
from managed_ledger.range_set import RangeSet
from managed_ledger.read_ahead import ReadAhead
from quire import hop_trace
from quire import invariants

if TYPE_CHECKING:
    from managed_ledger.ledger import ManagedLedger

log = logging.getLogger(__name__)

# process-wide count of persists that had to drop ranges (per cursor: stats()["rangesDroppedOnPersist"],
# shown in the internal stats); for a metrics exporter to read
RANGES_DROPPED_TOTAL = 0


class NoMoreEntriesError(ManagedLedgerTerminatedError):
    """The managed ledger is terminated and the cursor has read everything."""


class ManagedCursor:
    def __init__(self, ml: "ManagedLedger", name: str, durable: bool) -> None:
        self.ml = ml
        self.name = name
        self.durable = durable
        self.store = CursorStore(ml, name)
        self.path = self.store.path
        self.mark_delete_position = Position(-1, -1)
        self.read_position = Position(-1, 0)
        self._deleted = RangeSet()
        self._batch: dict[Position, AckSet] = {}
        self.properties: dict[str, int] = {}
        self.closed = False
        self._read_epoch = 0
        self._ahead = ReadAhead(ml)  # the next range, read while the last one is dispatched
        # persistence: a generation per state change, the last one persisted
        self._state_gen = 0
        self._persisted_gen = 0
        self._persist_lock = trio.Lock()
        self._last_persist = 0.0
        self.last_active_ms = _now_ms()
        self.ranges_dropped_count = 0  # persists that truncated the range set
        self.messages_consumed_counter = 0
        self.last_mark_delete_advanced_ms = 0

    # ------------------------------------------------------------------ views
    @property
    def individually_deleted_ranges(self) -> RangeSet:
        return self._deleted

    @property
    def batch_deleted_indexes(self) -> dict[Position, list[int]]:
        """Entry -> ack-set words (set bits = batch messages still unacknowledged)."""
        return {p: s.to_words() for p, s in self._batch.items()}

    @property
    def number_of_entries_in_backlog(self) -> int:
        ml = self.ml
        total = ml.count_entries_between(self.mark_delete_position, ml.last_confirmed_entry)
        return max(total - self._deleted.entry_count, 0)

    @property
    def number_of_entries(self) -> int:
        """Entries from the read position to the end, not counting deleted ones."""
        ml = self.ml
        start = ml.previous_position(ml.normalize(self.read_position))
        total = ml.count_entries_between(start, ml.last_confirmed_entry)
        return max(total - self._deleted.count_between(self.read_position.as_tuple(), ml.last_confirmed_entry.as_tuple()), 0)

    @property
    def has_more_entries(self) -> bool:
        return self.ml.normalize(self.read_position) <= self.ml.last_confirmed_entry

    @property
    def is_dirty(self) -> bool:
        """State changed since the last persisted write (the background loop flushes it)."""
        return self._state_gen > self._persisted_gen

    def is_deleted(self, pos: Position) -> bool:
        return pos <= self.mark_delete_position or pos.as_tuple() in self._deleted

    # ------------------------------------------------------------------ lifecycle
    def init_position(self, md: Position) -> None:
        self.mark_delete_position = md
        self.read_position = self.ml.next_valid_position(md)

    @property
    def cursor_properties(self) -> dict[str, str]:
        return self.store.cursor_properties

    async def create(self, md: Position) -> None:
        """New durable cursor: write its node (cursor ledger comes with the first flush)."""
        self.init_position(md)
        if not await self.store.create(PositionInfo(md.as_tuple())):
            await self.recover()  # created meanwhile by a previous owner: take its state

    async def recover(self) -> None:
        """Restore exactly what was persisted (see CursorStore.recover)."""
        self._apply(await self.store.recover())

    def _apply(self, pos: PositionInfo | None) -> None:
        ml = self.ml
        md = Position(*pos.mark_delete) if pos else ml.first_position()
        if md > ml.last_confirmed_entry:
            md = ml.last_confirmed_entry
        self.mark_delete_position = md
        self._deleted = RangeSet.from_flat(pos.individually_deleted) if pos else RangeSet()
        self._deleted.remove_up_to(md.as_tuple())
        self._batch = {}
        if pos:
            for ledger, entry, words in pos.batch_deleted:
                p = Position(ledger, entry)
                if p > md:
                    self._batch[p] = AckSet.from_words(words)
            self.properties = dict(pos.properties)
        self._collapse()
        self.read_position = ml.next_valid_position(self.mark_delete_position)

    def _check_open(self) -> None:
        if self.closed:
            raise ManagedLedgerClosedError(f"cursor {self.name} is closed")
        if self.ml.is_fenced:
            raise ManagedLedgerFencedError(self.ml.name)

    async def close(self) -> None:
        """Close this cursor (the managed ledger keeps its persisted state)."""
        await self.shutdown(persist=True)
        if self.durable:
            self.ml.cursors.pop(self.name, None)

    async def shutdown(self, persist: bool) -> None:
        if self.closed:
            return
        try:
            if self.durable and persist:
                await self._persist_on_close()
        finally:
            self.closed = True
            self._ahead.cancel()
            self.ml.forget_non_durable(self)
            await self.store.close_ledger()

    async def _persist_on_close(self) -> None:
        cfg = self.ml.config
        async with self._persist_lock:
            gen = self._state_gen
            if len(self._deleted) <= cfg.max_unacked_ranges_to_persist_in_metadata_store:
                # small state: the node holds it and the cursor ledger goes away
                await self.store.move_to_node(self._snapshot(cfg.max_unacked_ranges_to_persist))
            elif self._persisted_gen < gen or self.store.ledger is None:
                await self._write_position(self._snapshot(cfg.max_unacked_ranges_to_persist))
            self._persisted_gen = gen

    async def delete_persistent_state(self) -> None:
        self.closed = True
        version = self.store.node_version
        await self.store.delete(version if self.durable and version >= 0 else None)

    # ------------------------------------------------------------------ reads
    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Up to `max_entries` entries from the read position on, across ledgers, skipping
        individually deleted ones; [] when caught up."""
        self._check_open()
        ml = self.ml
        epoch = self._read_epoch
        out: list[Entry] = []
        pos = self.read_position
        while len(out) < max_entries:
            pos = ml.normalize(pos)
            if pos > ml.last_confirmed_entry:
                break
            if pos <= self.mark_delete_position:
                pos = ml.next_valid_position(self.mark_delete_position)
                continue
            rng = self._deleted.range_containing(pos.as_tuple())
            if rng is not None:
                pos = Position(pos.ledger_id, rng[1][1] + 1)
                continue
            info = ml.ledger_info(pos.ledger_id)
            if info is None:  # trimmed meanwhile: normalize moves on
                pos = Position(pos.ledger_id, 1 << 62)
                continue
            end = min(info.entries - 1, pos.entry_id + max_entries - len(out) - 1)
            nxt = self._deleted.first_start_after(pos.as_tuple())
            if nxt is not None and nxt[0] == pos.ledger_id:
                end = min(end, nxt[1] - 1)
            if end < pos.entry_id:
                break
            out.extend(await self._read_range(pos.ledger_id, pos.entry_id, end))
            pos = Position(pos.ledger_id, end + 1)
        if self._read_epoch == epoch and pos > self.read_position:
            self.read_position = pos
        self.messages_consumed_counter += len(out)
        self.last_active_ms = _now_ms()
        if out:
            ml.invalidate_cache()
        return out

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """``ml.read_range``, taking what was read ahead first."""
        got: list[Entry] = []
        while first + len(got) <= last:
            more = await self._ahead.take(ledger_id, first + len(got), last)
            if more is None:
                if hop_trace.ENABLED:
                    hop_trace.mark("c.direct", first + len(got), last)
                got += await self.ml.read_range(ledger_id, first + len(got), last)
                if hop_trace.ENABLED:
                    hop_trace.mark("c.direct.done", len(got))
                break
            got += more
        return got

    def read_ahead(self, max_entries: int) -> None:
        """Keep up to ``max_entries`` entries from the read position on being read in the
        background for the next ``read_entries`` calls (managed_ledger.read_ahead): a new
        read ahead starts once less than half of that is ahead; only while the cursor reads
        from the bookies (the next entry is not in the entry cache), one read per ledger,
        on into the next ledgers, up to an individually deleted range."""
        if self.closed:
            return
        ml = self.ml
        pos = ml.normalize(self.read_position)
        if pos <= self.mark_delete_position:
            pos = ml.next_valid_position(self.mark_delete_position)
        ahead = self._ahead
        if not ahead.starts_at(pos.ledger_id, pos.entry_id):
            ahead.cancel()
        have = ahead.entries
        if have >= max(max_entries // 2, 1):
            return  # enough is being read ahead
        end = ahead.end()
        start = pos if end is None else ml.normalize(Position(end[0], end[1] + 1))
        want = max_entries - have
        while want > 0:
            if start > ml.last_confirmed_entry or self._deleted.range_containing(start.as_tuple()) is not None:
                return
            info = ml.ledger_info(start.ledger_id)
            if info is None or ml.cache.contains(start.ledger_id, start.entry_id):
                return
            last = min(info.entries - 1, start.entry_id + want - 1)
            nxt = self._deleted.first_start_after(start.as_tuple())
            cut = nxt is not None and nxt[0] == start.ledger_id and nxt[1] - 1 < last
            if cut:
                last = nxt[1] - 1  # type: ignore[index]
            if last < start.entry_id or not ahead.start(start.ledger_id, start.entry_id, last):
                return
            want -= last - start.entry_id + 1
            if cut or last < info.entries - 1:
                return  # the range ends inside this ledger
            start = ml.normalize(Position(start.ledger_id, last + 1))
            if start.ledger_id == info.ledger_id:
                return  # the ledger being written: nothing after it yet

    async def read_entries_or_wait(self, max_entries: int) -> list[Entry]:
        """Like read_entries, but waits (no polling) until at least one entry is there."""
        while True:
            entries = await self.read_entries(max_entries)
            if entries:
                return entries
            ml = self.ml
            term = ml.terminated_position
            if term is not None and self.read_position > term:
                raise NoMoreEntriesError(f"{ml.name}: terminated at {term}")
            if ml.is_fenced:
                raise ManagedLedgerFencedError(ml.name)
            if self.closed or ml.state.value == "Closed":
                raise ManagedLedgerClosedError(ml.name)
            await ml.wait_for_entries_after(ml.previous_position(ml.normalize(self.read_position)))

    # ------------------------------------------------------------------ acks
    async def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Cumulative ack: everything up to and including `position`."""
        self._check_open()
        if position > self.ml.last_confirmed_entry:
            raise InvalidPositionError(f"{self.name}: mark-delete {position} beyond {self.ml.last_confirmed_entry}")
        if properties is not None:
            self.properties = dict(properties)
        if position <= self.mark_delete_position:
            if properties is not None:
                await self._persist()
            return
        old = self.mark_delete_position
        self._move_mark_delete(position)
        self._after_move(old)
        await self._persist()

    cumulative = mark_delete

    async def delete(self, positions: Iterable[Position], ack_sets: Mapping[Position, Sequence[int]] | None = None) -> None:
        """Individual acks. With `ack_sets` (Pulsar's ack_set words: set bits = batch
        messages left unacknowledged) an entry is only deleted once every index is acked."""
        self._check_open()
        ml = self.ml
        batch_level = ml.config.deletion_at_batch_index_level_enabled
        changed = False
        for p in positions:
            if p <= self.mark_delete_position or p > ml.last_confirmed_entry:
                continue
            if ack_sets and batch_level and p in ack_sets:
                given = AckSet.from_words(ack_sets[p])
                current = self._batch.get(p)
                merged = given if current is None else current.intersect(given)
                if not merged.is_empty():
                    self._batch[p] = merged
                    changed = True
                    continue
            self._batch.pop(p, None)
            self._deleted.add(p.as_tuple())
            changed = True
        if not changed:
            return
        old = self.mark_delete_position
        self._collapse()
        self._after_move(old)
        await self._persist()

    def _move_mark_delete(self, position: Position) -> None:
        if invariants.ENABLED and position < self.mark_delete_position:
            # only reset_cursor (a seek the user asked for) may move it back
            invariants.violated(f"cursor {self.name}: mark-delete moving back from "
                                f"{self.mark_delete_position} to {position}")
        self.mark_delete_position = position
        self._deleted.remove_up_to(position.as_tuple())
        self._collapse()

    def _collapse(self) -> None:
        """Fold individually deleted ranges that touch the mark-delete into it."""
        ml = self.ml
        while True:
            first = self._deleted.first_range()
            if first is None or Position(*first[0]) > ml.next_valid_position(self.mark_delete_position):
                break
            nxt = Position(*first[1])
            if invariants.ENABLED and nxt < self.mark_delete_position:
                invariants.violated(f"cursor {self.name}: collapsing acks moved mark-delete back "
                                    f"from {self.mark_delete_position} to {nxt}")
            self.mark_delete_position = nxt
            self._deleted.remove_up_to(first[1])
        if self._batch:
            md = self.mark_delete_position
            for p in [p for p in self._batch if p <= md]:
                del self._batch[p]

    def _after_move(self, old_md: Position) -> None:
        md = self.mark_delete_position
        if self.read_position <= md:
            self.read_position = self.ml.next_valid_position(md)
        if md != old_md:
            self.last_mark_delete_advanced_ms = _now_ms()
            self.ml.cursor_moved(self, old_md)

    def advance_for_trim(self, horizon: Position) -> None:
        """Trimming deletes ledgers up to `horizon`: a cursor behind it moves forward."""
        old = self.mark_delete_position
        self._move_mark_delete(horizon)
        if self.read_position <= self.mark_delete_position:
            self.read_position = self.ml.next_valid_position(self.mark_delete_position)
        if self.durable and old != self.mark_delete_position:
            self._state_gen += 1

    async def skip_entries(self, n: int) -> None:
        """Acknowledge the next `n` not-yet-deleted entries after the mark-delete."""
        self._check_open()
        ml = self.ml
        pos = self.mark_delete_position
        skipped = 0
        target = pos
        while skipped < n:
            nxt = ml.next_valid_position(target)
            if nxt > ml.last_confirmed_entry:
                break
            target = nxt
            if nxt.as_tuple() not in self._deleted:
                skipped += 1
        if target > self.mark_delete_position:
            await self.mark_delete(target)

    async def clear_backlog(self) -> None:
        if self.ml.last_confirmed_entry > self.mark_delete_position:
            await self.mark_delete(self.ml.last_confirmed_entry)

    # ------------------------------------------------------------------ seek / find
    async def seek(self, position: Position) -> None:
        """Move only the read position (kept after the mark-delete)."""
        self._check_open()
        self._read_epoch += 1
        floor = self.ml.next_valid_position(self.mark_delete_position)
        self.read_position = max(self.ml.normalize(position), floor)

    async def reset_cursor(self, position: Position) -> None:
        """Subscription reset: everything before `position` counts as acknowledged and
        nothing after it does; reading restarts at `position`."""
        self._check_open()
        ml = self.ml
        end = ml.next_valid_position(ml.last_confirmed_entry)
        target = min(ml.normalize(position), end)
        first = ml.next_valid_position(ml.first_position())
        if target < first:
            target = first
        old = self.mark_delete_position
        self._read_epoch += 1
        self.mark_delete_position = ml.previous_position(target)
        self._deleted.clear()
        self._batch.clear()
        self.read_position = target
        if old.ledger_id != self.mark_delete_position.ledger_id:
            ml.cursor_moved(self, old)
        await self._persist(force=True)

    async def find_newest_matching(self, predicate: Callable[[Entry], bool], all_entries: bool = False) -> Position | None:
        """Binary search for the newest entry matching `predicate`, which must hold for a
        prefix of the entries (e.g. "published before T"). Searches the entries after the
        mark-delete, or every stored entry with all_entries=True."""
        self._check_open()
        ml = self.ml
        start = ml.first_position() if all_entries else self.mark_delete_position
        n = ml.count_entries_between(start, ml.last_confirmed_entry)
        lo, hi, found = 0, n - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            pos = ml.position_at_offset(start, mid)
            if pos is None:
                break
            if predicate(await ml.read_entry(pos)):
                found, lo = pos, mid + 1
            else:
                hi = mid - 1
        return found

    async def expire_entries(self, is_expired: Callable[[Entry], bool]) -> Position | None:
        """Message TTL: acknowledge every entry up to the newest expired one."""
        pos = await self.find_newest_matching(is_expired)
        if pos is not None and pos > self.mark_delete_position:
            await self.mark_delete(pos)
        return pos

    async def expire_by_ledger_closure_time(self, ttl_s: float) -> Position | None:
        """Message TTL without reading entries (Pulsar's checkExpiryByLedgerClosureTime):
        every entry of a ledger closed more than `ttl_s` ago is older than the TTL, so the
        mark-delete moves to the last entry of the newest such ledger in the run of expired
        ledgers starting at the mark-delete's ledger. Returns the new mark-delete or None."""
        self._check_open()
        ml = self.ml
        cutoff = _now_ms() - int(ttl_s * 1000)
        target: Position | None = None
        for li in ml.ledgers:
            if li.ledger_id < self.mark_delete_position.ledger_id:
                continue
            # the current ledger (timestamp 0) and younger ledgers end the run
            if li.timestamp_ms <= 0 or li.timestamp_ms > cutoff or li.ledger_id == ml.current_ledger_id:
                break
            if li.entries > 0:
                target = Position(li.ledger_id, li.entries - 1)
        if target is None:
            return None
        target = min(target, ml.last_confirmed_entry)
        if target <= self.mark_delete_position:
            return None
        await self.mark_delete(target)
        return target

    # ------------------------------------------------------------------ persistence
    def _snapshot(self, max_ranges: int) -> PositionInfo:
        global RANGES_DROPPED_TOTAL
        cfg = self.ml.config
        n = len(self._deleted)
        if n > max_ranges:
            self.ranges_dropped_count += 1
            RANGES_DROPPED_TOTAL += 1
            log.warning(
                "%s: %d individually deleted ranges, persisting only the first %d; the acks in the "
                "other %d ranges will be redelivered after a restart",
                self.path, n, max_ranges, n - max_ranges,
            )
        batch: list[list] = []
        for p in sorted(self._batch):
            if len(batch) >= cfg.max_batch_deleted_index_to_persist:
                log.warning("%s: %d batch ack sets, persisting only %d", self.path, len(self._batch), len(batch))
                break
            batch.append([p.ledger_id, p.entry_id, self._batch[p].to_words()])
        return PositionInfo(self.mark_delete_position.as_tuple(), self._deleted.to_flat(max_ranges), batch, dict(self.properties))

    async def _persist(self, force: bool = False) -> None:
        if not self.durable:
            return
        self._state_gen += 1
        gen = self._state_gen
        rate = self.ml.config.throttle_mark_delete
        if rate > 0 and not force and trio.current_time() - self._last_persist < 1.0 / rate:
            self.ml.rearm_background()  # stays dirty; the background loop flushes it
            return
        await self._flush(gen)

    async def flush_if_dirty(self) -> None:
        if self.durable and not self.closed and self._state_gen > self._persisted_gen:
            await self._flush(self._state_gen)

    async def flush(self) -> None:
        """Persist the current state now (e.g. before a planned shutdown)."""
        await self.flush_if_dirty()

    async def _flush(self, gen: int) -> None:
        async with self._persist_lock:
            if self._persisted_gen >= gen or self.closed:
                return  # a later flush already covered this state
            gen = self._state_gen
            self._last_persist = trio.current_time()
            await self._write_position(self._snapshot(self.ml.config.max_unacked_ranges_to_persist))
            self._persisted_gen = gen

    async def _write_position(self, info: PositionInfo) -> None:
        cfg = self.ml.config

        def node_fallback() -> PositionInfo:
            return PositionInfo(info.mark_delete, self._deleted.to_flat(cfg.max_unacked_ranges_to_persist_in_metadata_store),
                                [], info.properties)

        await self.store.write_position(info, node_fallback)

    async def set_cursor_properties(self, props: Mapping[str, str]) -> None:
        self.store.cursor_properties = dict(props)
        async with self._persist_lock:
            await self.store.write_node(self.store.node_ledger_id,
                                        self._snapshot(self.ml.config.max_unacked_ranges_to_persist_in_metadata_store))

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict[str, Any]:
        ml = self.ml
        return {
            "markDeletePosition": str(self.mark_delete_position),
            "readPosition": str(self.read_position),
            "waitingReadOp": False,
            "pendingReadOps": 0,
            "messagesConsumedCounter": self.messages_consumed_counter,
            "cursorLedger": self.store.ledger_id,
            "cursorLedgerLastEntry": self.store.ledger_entries - 1,
            "individuallyDeletedMessages": self._deleted.to_pulsar_string(),
            "lastLedgerSwitchTimestamp": "",
            "state": "Closed" if self.closed else ("Open" if self.store.ledger is not None or not self.durable else "NoLedger"),
            "active": not self.closed,
            "numberOfEntriesSinceFirstNotAckedMessage": ml.count_entries_between(self.mark_delete_position, self.read_position) + 1
            if self.read_position > self.mark_delete_position else 1,
            "totalNonContiguousDeletedMessagesRange": len(self._deleted),
            "subscriptionHavePendingRead": False,
            "subscriptionHavePendingReplayRead": False,
            "properties": dict(self.properties),
            "durable": self.durable,
            "rangesDroppedOnPersist": self.ranges_dropped_count,
            "messagesInBacklog": self.number_of_entries_in_backlog,
        }
