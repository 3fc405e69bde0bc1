"""LedgerStorage: DbLedgerStorage-like storage over one or more ledger dirs.

Adds land in the two-half :class:`WriteCache`; a checkpoint swaps the halves and writes the
flushed half, sorted by (ledger, entry), to each dir's entry log, fsyncs, then records the
locations (and dirty ledger states) in the dir's RocksDB indexes before dropping the half.
Reads go write cache -> read cache -> location index -> entry log, with read-ahead of the
following entries of the same ledger into the read cache. A ledger lives in the dir
``ledger_id % len(dirs)``; the journal mark that a checkpoint advances spans all dirs, so only
the coordinated checkpoint (:mod:`bookie.sync_thread`) ever persists it.

Ledger state (exists, fenced, master key, explicit LAC, deleted) is kept in memory and written
back at checkpoints; until then the journal's meta records make it durable.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import trio

from bookie import compactor
from bookie.config import MB, BookieConfig
from bookie.entry_format import HEADER_SIZE as ENTRY_HEADER_SIZE, entry_lac
from bookie.entry_logger import CACHE_KEEP, EntryLogger
from bookie.errors import BookieIOError, DiskFullError, NoEntryError, NoLedgerError, TooManyRequestsError, is_disk_full
from bookie.journal import Journal
from bookie.ledger_index import EntryLocationIndex, LedgerMetadataIndex, LedgerState
from bookie.log_mark import LogMark
from bookie.metrics import BookieMetrics
from bookie.read_cache import ReadCache
from bookie.write_cache import WriteCache, WriteCacheHalf

log = logging.getLogger(__name__)

_READ_AHEAD_MAX_BYTES = 512 * 1024


@dataclass
class DirStorage:
    """The per-ledger-dir parts: an entry logger and its two RocksDB indexes."""

    current: Path
    entry_logger: EntryLogger
    locations: EntryLocationIndex
    ledgers: LedgerMetadataIndex

    def close(self) -> None:
        self.entry_logger.close()
        self.locations.close()
        self.ledgers.close()


def ledger_dirs_current(config: BookieConfig) -> list[Path]:
    return [Path(d) / "current" for d in config.ledger_directories]


class LedgerStorage:
    def __init__(self, config: BookieConfig, metrics: BookieMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.dirs: list[DirStorage] = []
        self.write_cache = WriteCache(config.db_storage_write_cache_max_size_mb * MB)
        self.read_cache = ReadCache(config.db_storage_read_ahead_cache_max_size_mb * MB)
        self.states: dict[int, LedgerState] = {}
        self._dirty: set[int] = set()
        self._read_limiter = trio.CapacityLimiter(4)
        self._flush_lock = trio.Lock()
        self._flush_done = trio.Event()
        self._pending_mark: LogMark | None = None
        self._lac_events: dict[int, trio.Event] = {}
        # Set by the sync thread: asks for a checkpoint soon (the write cache filled up).
        self.request_flush: Callable[[], None] = lambda: None
        self._read_ahead_bytes = min(_READ_AHEAD_MAX_BYTES, self.read_cache.max_bytes // 2)
        # A RocksDB write that failed (e.g. ENOSPC) leaves the database refusing every later
        # write until it is reopened: the next checkpoint does that first.
        self._indexes_broken = False
        self.disk_full_at_open = ""  # why open() had to open indexes read-only, if it had to

    # --- lifecycle (blocking; call from a thread) -----------------------------------------

    def open(self) -> None:
        for cur in ledger_dirs_current(self.config):
            cur.mkdir(parents=True, exist_ok=True)
            opened: list[EntryLocationIndex | LedgerMetadataIndex] = []
            try:
                locations = EntryLocationIndex(cur / "locations")
                opened.append(locations)
                ledgers = LedgerMetadataIndex(cur / "ledgers")
            except Exception as exc:  # rocksdb errors have no common base class
                for index in opened:  # reopened read-only below: one handle per database
                    index.close()
                if not is_disk_full(exc):
                    raise
                if compactor.unfinished(cur):
                    # Finishing it writes the index: starting without it could reuse its log id.
                    raise DiskFullError(f"{cur}: an interrupted compaction cannot be finished on a full "
                                        f"disk ({exc}); free some space and start again") from exc
                # No room even to open them for writing: read-only now, reopened for writing
                # by the first checkpoint once space is back.
                log.error("ledger indexes in %s opened read-only: %s", cur, exc)
                self.disk_full_at_open = f"index: {exc}"
                self._indexes_broken = True
                locations = EntryLocationIndex(cur / "locations", read_only=True)
                ledgers = LedgerMetadataIndex(cur / "ledgers", read_only=True)
            else:
                compactor.recover(cur, locations)  # before any read or new log id
            logger = EntryLogger(cur, self.config.log_size_limit,
                                 CACHE_KEEP if self.config.entry_log_remove_pages_from_cache else None)
            logger.open()
            d = DirStorage(cur, logger, locations, ledgers)
            self.dirs.append(d)
            self.states.update(d.ledgers.load_all())
        self.metrics.ledgers.set(len(self.states))

    def close(self) -> None:
        for d in self.dirs:
            d.close()
        self.dirs = []

    def _dir_for(self, ledger_id: int) -> DirStorage:
        return self.dirs[ledger_id % len(self.dirs)]

    # --- ledger state ----------------------------------------------------------------------

    def state(self, ledger_id: int) -> LedgerState | None:
        st = self.states.get(ledger_id)
        return None if st is None or st.deleted else st

    def is_deleted(self, ledger_id: int) -> bool:
        st = self.states.get(ledger_id)
        return st is not None and st.deleted

    def create_ledger(self, ledger_id: int, master_key: bytes) -> LedgerState:
        """Record a new ledger (the caller journals its master key)."""
        st = self.states.get(ledger_id)
        if st is not None and st.deleted:
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        if st is None:
            st = self.states[ledger_id] = LedgerState(master_key=master_key, top=-1)  # new: no entries
            self._dirty.add(ledger_id)
            self.metrics.ledgers.set(len(self.states))
        return st

    def set_master_key(self, ledger_id: int, master_key: bytes) -> None:
        st = self.states.get(ledger_id)
        if st is None:
            self.create_ledger(ledger_id, master_key)
        elif not st.master_key and master_key:
            st.master_key = master_key
            self._dirty.add(ledger_id)

    def set_fenced(self, ledger_id: int) -> bool:
        """Fence in memory (durable through the journal until the next checkpoint)."""
        st = self.states.get(ledger_id)
        if st is None:
            st = self.create_ledger(ledger_id, b"")
        if st.fenced:
            return False
        st.fenced = True
        self._dirty.add(ledger_id)
        self._notify_lac(ledger_id)  # wake long polls: the ledger will not grow any more
        return True

    def set_explicit_lac(self, ledger_id: int, lac: int, body: bytes) -> None:
        st = self.states.get(ledger_id)
        if st is None:
            st = self.create_ledger(ledger_id, b"")
        st.explicit_lac = body
        if lac > st.lac:
            st.lac = lac
            self._notify_lac(ledger_id)
        self._dirty.add(ledger_id)

    def mark_deleted(self, ledger_id: int) -> None:
        """Remember that the ledger is gone: adds are refused from now on, data is dropped."""
        self.states[ledger_id] = LedgerState(exists=False, deleted=True)
        self._dirty.add(ledger_id)
        self.write_cache.drop_ledger(ledger_id)
        self.read_cache.drop_ledger(ledger_id)

    # --- adds ------------------------------------------------------------------------------

    def try_add(self, ledger_id: int, entry_id: int, data: bytes, lac: int, st: LedgerState | None = None,
                force: bool = False) -> bool:
        """Put an entry into the write cache; False when the cache is full (throttle).
        ``st`` is the ledger's state if the caller already looked it up (the add hot path);
        ``force`` puts it past the cache's limit (see ``WriteCache.put``)."""
        wc = self.write_cache
        if not wc.put(ledger_id, entry_id, data, force):
            self.request_flush()
            return False
        if wc.active.size >= wc.half_limit:
            self.request_flush()
        if st is None:
            st = self.states.get(ledger_id)
        if st is None:
            return True
        if entry_id > st.top:  # (never while unknown: TOP_UNKNOWN is above every id)
            st.top = entry_id
        if lac > st.lac:
            st.lac = lac
            if ledger_id in self._lac_events:
                self._notify_lac(ledger_id)
        return True

    async def wait_for_room(self, deadline: float) -> bool:
        """Wait (at most until ``deadline``, monotonic) for a checkpoint to free write-cache
        room; False once the deadline has passed. Callers retry ``try_add`` after each wait."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        with trio.move_on_after(min(remaining, 0.05)):
            await self._flush_done.wait()
        return True

    async def add_entry(self, ledger_id: int, entry_id: int, data: bytes, lac: int) -> None:
        """Put an entry, waiting up to db_storage_max_throttle_time_ms for cache room."""
        if self.try_add(ledger_id, entry_id, data, lac):
            return
        self.metrics.throttled_adds.inc()
        deadline = time.monotonic() + self.config.db_storage_max_throttle_time_ms / 1000.0
        while await self.wait_for_room(deadline):
            if self.try_add(ledger_id, entry_id, data, lac):
                return
        raise TooManyRequestsError("write cache full")

    # --- long poll -------------------------------------------------------------------------

    def _notify_lac(self, ledger_id: int) -> None:
        ev = self._lac_events.pop(ledger_id, None)
        if ev is not None:
            ev.set()

    async def wait_lac_change(self, ledger_id: int, previous_lac: int, timeout_s: float) -> None:
        """Return when the ledger's LAC exceeds previous_lac, it is fenced, or the timeout."""
        with trio.move_on_after(timeout_s):
            while True:
                st = self.states.get(ledger_id)
                if st is None or st.fenced or st.lac > previous_lac:
                    return
                ev = self._lac_events.get(ledger_id)
                if ev is None:
                    ev = self._lac_events[ledger_id] = trio.Event()
                await ev.wait()

    # --- reads -----------------------------------------------------------------------------

    def cached_entry(self, ledger_id: int, entry_id: int) -> bytes | None:
        data = self.write_cache.get(ledger_id, entry_id)
        if data is not None:
            self.metrics.write_cache_hits.inc()
            return data
        data = self.read_cache.get(ledger_id, entry_id)
        if data is not None:
            self.metrics.read_cache_hits.inc()
        return data

    async def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """The entry's bytes; NoLedgerError / NoEntryError / BookieIOError."""
        data = self.cached_entry(ledger_id, entry_id)
        if data is not None:
            return data
        if self.is_deleted(ledger_id):
            raise NoLedgerError(f"ledger {ledger_id} was deleted")
        self.metrics.read_cache_misses.inc()
        d = self._dir_for(ledger_id)
        found = await trio.to_thread.run_sync(self._read_from_disk, d, ledger_id, entry_id, limiter=self._read_limiter)
        if found is None:
            data = self.write_cache.get(ledger_id, entry_id)  # added meanwhile
            if data is not None:
                return data
            if self.state(ledger_id) is None:
                raise NoLedgerError(f"ledger {ledger_id} unknown")
            raise NoEntryError(f"entry {ledger_id}:{entry_id} not found")
        data, following = found
        rc = self.read_cache
        rc.put(ledger_id, entry_id, data)
        for eid, edata in following:
            rc.put(ledger_id, eid, edata)
        self.metrics.read_cache_size.set(rc.size)
        return data

    async def read_range(self, ledger_id: int, first: int, last: int, max_entries: int,
                         max_bytes: int) -> list[bytes | memoryview]:
        """Entries ``first..`` up to ``last`` (at least one; NoLedgerError / NoEntryError /
        BookieIOError if ``first`` cannot be read), at most ``max_entries`` and about
        ``max_bytes``: the caches first, then per uncached run one worker-thread hop doing
        one index lookup and sequential entry log reads. A range reader asks for what it
        reads next itself, so the run is not copied into the read-ahead cache (which keeps
        serving single-entry readers). Entries read from the entry logs may be memoryviews of
        the read buffer; every entry returned had its stored checksum verified on the way
        (the entry log's record CRC32C) or never left this process's memory."""
        out: list[bytes | memoryview] = []
        size = 0
        eid = first
        cached = self.cached_entry
        while eid <= last and len(out) < max_entries:
            data = cached(ledger_id, eid)
            if data is None:
                if self.is_deleted(ledger_id):
                    raise NoLedgerError(f"ledger {ledger_id} was deleted")
                self.metrics.read_cache_misses.inc()
                d = self._dir_for(ledger_id)
                run = await trio.to_thread.run_sync(self._read_run_from_disk, d, ledger_id, eid, min(last - eid + 1, max_entries - len(out)),
                                                    max(max_bytes - size, 1), limiter=self._read_limiter)
                if not run:
                    data = self.write_cache.get(ledger_id, eid)  # added meanwhile
                    if data is None:
                        if out:
                            break
                        if self.state(ledger_id) is None:
                            raise NoLedgerError(f"ledger {ledger_id} unknown")
                        raise NoEntryError(f"entry {ledger_id}:{eid} not found")
                else:
                    if out and size + len(run[0]) > max_bytes:
                        break  # only the range's first entry may exceed the byte budget
                    out.extend(run)
                    size += sum(map(len, run))
                    eid += len(run)
                    continue
            if out and size + len(data) > max_bytes:
                break
            out.append(data)
            size += len(data)
            eid += 1
        return out

    def _read_run_from_disk(self, d: DirStorage, ledger_id: int, entry_id: int, max_entries: int,
                            max_bytes: int) -> list[bytes | memoryview]:
        try:
            loc = d.locations.get(ledger_id, entry_id)
        except Exception as exc:  # rocksdb errors have no common base class
            raise BookieIOError(f"location index read failed: {exc}") from exc
        if loc is None:
            return []
        try:
            return d.entry_logger.read_run(loc, ledger_id, entry_id, max_entries, max_bytes)
        except BookieIOError:
            # Compaction may have moved the entry and deleted the old log since the lookup.
            moved = d.locations.get(ledger_id, entry_id)
            if moved is None or moved == loc:
                raise
            return d.entry_logger.read_run(moved, ledger_id, entry_id, max_entries, max_bytes)

    def _read_from_disk(self, d: DirStorage, ledger_id: int, entry_id: int) -> tuple[bytes, list] | None:
        try:
            loc = d.locations.get(ledger_id, entry_id)
        except Exception as exc:  # rocksdb errors have no common base class
            raise BookieIOError(f"location index read failed: {exc}") from exc
        if loc is None:
            return None
        try:
            data = d.entry_logger.read(loc, ledger_id, entry_id)  # BookieIOError, never NoEntry
        except BookieIOError:
            # Compaction may have moved the entry and deleted the old log since the lookup.
            moved = d.locations.get(ledger_id, entry_id)
            if moved is None or moved == loc:
                raise
            loc = moved
            data = d.entry_logger.read(loc, ledger_id, entry_id)
        following = d.entry_logger.read_ahead(
            loc, ledger_id, self.config.db_storage_read_ahead_cache_batch_size, self._read_ahead_bytes
        )
        return data, following

    async def last_entry_id(self, ledger_id: int) -> int:
        """Highest entry id stored for the ledger (-1 if none)."""
        cached = self.write_cache.last_entry(ledger_id)
        d = self._dir_for(ledger_id)
        indexed = await trio.to_thread.run_sync(d.locations.last_entry, ledger_id, limiter=self._read_limiter)
        return max(cached, indexed, self.write_cache.last_entry(ledger_id))

    async def logs_referenced(self, dir_index: int, log_ids: set[int], ignore_ledgers: set[int]) -> set[int]:
        """Which of a dir's ``log_ids`` its index still points into for a ledger not in
        ``ignore_ledgers`` (a full index scan, holding one read token: an index reopen waits)."""
        d = self.dirs[dir_index]
        return await trio.to_thread.run_sync(d.locations.logs_referenced, log_ids, ignore_ledgers,
                                             limiter=self._read_limiter)

    async def last_add_confirmed(self, ledger_id: int) -> int:
        """The ledger's LAC: the max of the LACs carried by its entries and the explicit one."""
        st = self.state(ledger_id)
        if st is None:
            raise NoLedgerError(f"ledger {ledger_id} unknown")
        if st.lac < 0:
            last = await self.last_entry_id(ledger_id)
            if last >= 0:
                data = await self.read_entry(ledger_id, last)
                if len(data) >= ENTRY_HEADER_SIZE:
                    st.lac = max(st.lac, entry_lac(data))
        return st.lac

    # --- checkpoint ------------------------------------------------------------------------

    async def checkpoint(self, journal: Journal | None) -> LogMark | None:
        """Flush the write cache; returns the journal mark now covered by entry logs + index.

        The mark is taken together with the cache swap (no await in between): every record
        before it in the journal was put into the write cache before it was journaled, so it
        is in the half being flushed or was flushed earlier.
        """
        async with self._flush_lock:
            if self._indexes_broken:
                await self._reopen_indexes()
            if self.write_cache.flushing is None:
                self._pending_mark = journal.durable_mark if journal is not None else None
                half = self.write_cache.swap()
            else:
                half = self.write_cache.flushing  # a previous flush failed: retry it
            dirty = {lid: replace(self.states[lid]) for lid in self._dirty if lid in self.states}
            self._dirty = set()
            t0 = time.perf_counter()
            try:
                await trio.to_thread.run_sync(self._flush_half, half, dirty)
            except BaseException:
                self._dirty.update(dirty)
                raise
            self.write_cache.flushed()
            self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)
            self.metrics.checkpoint_entries.inc(len(half))
            self.metrics.write_cache_size.set(self.write_cache.active.size)
            done, self._flush_done = self._flush_done, trio.Event()
            done.set()
            return self._pending_mark

    def _flush_half(self, half: WriteCacheHalf, dirty: dict[int, LedgerState]) -> None:
        """Worker thread: entry logs (fsynced) then locations then ledger states, per dir."""
        n = len(self.dirs)
        entries = half.sorted_entries()
        if n == 1:
            per_dir = [entries]
        else:
            per_dir = [[] for _ in range(n)]
            for item in entries:
                per_dir[item[0] % n].append(item)
        positions = [d.entry_logger.write_position() for d in self.dirs]
        try:
            located = []
            for d, items in zip(self.dirs, per_dir):
                located.append(d.entry_logger.add_entries(items) if items else [])
                d.entry_logger.flush()
        except OSError as exc:
            for d, pos in zip(self.dirs, positions):
                try:
                    d.entry_logger.truncate_to(pos)  # give back what the failed flush wrote
                except OSError:
                    log.exception("could not roll back entry log %s", d.current)
            if is_disk_full(exc):
                raise DiskFullError(f"checkpoint: entry log: {exc}") from exc
            raise BookieIOError(f"checkpoint failed: {exc}") from exc
        try:
            for d, items, locations in zip(self.dirs, per_dir, located):
                if items:
                    d.locations.put_encoded(items, locations)
                d.entry_logger.mark_indexed()  # rotated logs may now be garbage collected
            for i, d in enumerate(self.dirs):
                states = {lid: st for lid, st in dirty.items() if lid % n == i}
                d.ledgers.put_batch(states)
                for lid, st in states.items():
                    if st.deleted:
                        d.locations.delete_ledger(lid)
        except Exception as exc:  # rocksdb errors have no common base class
            self._indexes_broken = True
            if is_disk_full(exc):
                raise DiskFullError(f"checkpoint: index: {exc}") from exc
            raise BookieIOError(f"checkpoint failed: {exc}") from exc

    async def tombstone(self, ledger_ids: list[int]) -> None:
        """Mark ledgers deleted and persist that at once (synced), dropping their index ranges.

        Under the flush lock: a checkpoint that copied a ledger's state before the tombstone
        would otherwise write the live state over it after we wrote it."""
        async with self._flush_lock:
            for lid in ledger_ids:
                self.mark_deleted(lid)
            n = len(self.dirs)
            per_dir = {i: {lid: self.states[lid] for lid in ledger_ids if lid % n == i} for i in range(n)}

            def persist() -> None:
                for i, states in per_dir.items():
                    if states:
                        self.dirs[i].ledgers.put_batch(states)
                        for lid in states:
                            self.dirs[i].locations.delete_ledger(lid)

            await trio.to_thread.run_sync(persist)

    async def run_locked_index_update(self, fn: Callable[..., object], *args: object) -> object:
        """Run ``fn(*args)`` in a thread while no checkpoint writes locations (compaction)."""
        async with self._flush_lock:
            return await trio.to_thread.run_sync(fn, *args)

    async def _reopen_indexes(self) -> None:
        """Close and reopen every dir's RocksDB indexes (the flush lock is held): reads wait,
        holding every read token, so no thread uses a database while it is swapped."""
        limiter = self._read_limiter
        holders = [object() for _ in range(int(limiter.total_tokens))]
        for h in holders:
            await limiter.acquire_on_behalf_of(h)
        try:
            await trio.to_thread.run_sync(self._reopen_indexes_blocking)
            self._indexes_broken = False
            log.info("ledger indexes reopened after a failed write")
        finally:
            for h in holders:
                limiter.release_on_behalf_of(h)

    def _reopen_indexes_blocking(self) -> None:
        failed: Exception | None = None
        for d in self.dirs:
            for index in (d.locations, d.ledgers):
                try:
                    index.close()
                except Exception:  # a database with a failed write may refuse a clean close
                    log.warning("closing a failed index of %s", d.current, exc_info=True)
            try:
                d.locations = EntryLocationIndex(d.current / "locations")
            except Exception as exc:  # still no room: read-only handles keep reads served
                failed = exc
                d.locations = EntryLocationIndex(d.current / "locations", read_only=True)
            try:
                d.ledgers = LedgerMetadataIndex(d.current / "ledgers")
            except Exception as exc:
                failed = exc
                d.ledgers = LedgerMetadataIndex(d.current / "ledgers", read_only=True)
        if failed is not None:
            if is_disk_full(failed):
                raise DiskFullError(f"reopening the indexes: {failed}") from failed
            raise BookieIOError(f"reopening the indexes: {failed}") from failed

    # --- disk usage ------------------------------------------------------------------------

    def disk_usage(self) -> tuple[int, int]:
        """(free, total) bytes over the ledger dirs' filesystems (each counted once)."""
        seen: set[int] = set()
        free = total = 0
        for d in self.config.ledger_directories:
            st = os.statvfs(d)
            if st.f_fsid in seen:
                continue
            seen.add(st.f_fsid)
            free += st.f_bavail * st.f_frsize
            total += st.f_blocks * st.f_frsize
        return free, total
