"""GarbageCollector: gives the disk back once ledgers are deleted (one per ledger dir).

Each run (every ``gc_wait_time_ms``, or when forced over HTTP), BookKeeper's order:

1. **ledgers**: snapshot this dir's local ledgers, *then* list the ledgers of the metadata
   store (``iter_ledger_ids``); a local ledger missing from the listing, and still missing
   when looked up once more, gets a tombstone (its state ``deleted``, synced) and loses its
   location index range. The snapshot comes first so a ledger created during the listing is
   never collected; the tombstone stays so journal replay or a late add never revives it.
2. **entry-log metadata** for every rotated, fully indexed log not known yet (ledgers map,
   else a scan; persisted in ``current/entrylog_meta``). The writer's logs that may still
   lack index entries, the current one included, are never looked at.
3. **delete** logs whose ledgers are all tombstoned. A corrupt log is reported and kept until
   the index points into it for no live ledger.
4. **compaction**: major if ``major_compaction_interval`` passed (or forced), else minor;
   logs under the threshold, lowest usage first, within ``*_compaction_max_time_millis``,
   throttled (:mod:`bookie.compactor`). Disk over ``disk_usage_warn_threshold`` suspends
   major compaction, over ``disk_usage_threshold`` both, unless
   ``is_force_gc_allow_when_no_space``.

A ledger is dead here only if it has a tombstone: an unknown ledger counts as alive, so a
missing state can never make live data disappear. One failing step is logged and counted;
the task goes on with the next run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from bookie import compactor
from bookie import entry_log_format as elf
from bookie.config import BookieConfig
from bookie.entry_log_metadata import EntryLogMetadata, EntryLogMetadataMap, read_metadata
from bookie.entry_logger import list_log_ids
from bookie.errors import BookieIOError, ConfigError, FormatError, is_disk_full
from bookie.metrics import BookieMetrics
from metadata.errors import MetadataError
from metadata.ledger_ids import iter_ledger_ids, ledger_path
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from bookie.ledger_storage import DirStorage, LedgerStorage

log = logging.getLogger(__name__)

META_DB = "entrylog_meta"


def check_gc_config(cfg: BookieConfig) -> None:
    """BookKeeper's GarbageCollectorThread constructor checks."""
    for name in ("minor_compaction_threshold", "major_compaction_threshold"):
        if getattr(cfg, name) > 1.0:
            raise ConfigError(f"{name} must be <= 1.0")
    if 0 < cfg.major_compaction_threshold < cfg.minor_compaction_threshold:
        raise ConfigError("minor_compaction_threshold must be below major_compaction_threshold")
    if cfg.gc_wait_time_ms <= 0:
        raise ConfigError("gc_wait_time_ms must be positive")
    for name in ("minor_compaction_interval", "major_compaction_interval"):
        value = getattr(cfg, name)
        if 0 < value * 1000 < cfg.gc_wait_time_ms:
            raise ConfigError(f"{name} ({value} s) must be >= gc_wait_time_ms")


@dataclass
class GcStatus:
    """One dir's entry of GET /api/v1/bookie/gc_details (BookKeeper's GarbageCollectionStatus)."""

    force_compacting: bool = False
    major_compacting: bool = False
    minor_compacting: bool = False
    last_major_compaction_time: int = 0  # ms since the epoch
    last_minor_compaction_time: int = 0
    major_compaction_counter: int = 0
    minor_compaction_counter: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "forceCompacting": self.force_compacting,
            "majorCompacting": self.major_compacting,
            "minorCompacting": self.minor_compacting,
            "lastMajorCompactionTime": self.last_major_compaction_time,
            "lastMinorCompactionTime": self.last_minor_compaction_time,
            "lastEntryLocationCompactionTime": 0,
            "majorCompactionCounter": self.major_compaction_counter,
            "minorCompactionCounter": self.minor_compaction_counter,
            "entryLocationCompactionCounter": 0,
        }


class GarbageCollector:
    def __init__(
        self,
        config: BookieConfig,
        storage: "LedgerStorage",
        dir_index: int,
        store: MetadataStore | None,
        metrics: BookieMetrics,
    ) -> None:
        check_gc_config(config)
        self.config = config
        self.storage = storage
        self.dir_index = dir_index
        self.store = store
        self.metrics = metrics
        self.metas: dict[int, EntryLogMetadata] = {}
        self.corrupt: dict[int, str] = {}  # log id -> why it is skipped
        self.status = GcStatus()
        now = time.time()
        self._last_major = self._last_minor = now
        self.status.last_major_compaction_time = self.status.last_minor_compaction_time = int(now * 1000)
        self.suspend_major = False  # set over HTTP (suspend_compaction)
        self.suspend_minor = False
        self.runs = 0
        self.failed_runs = 0
        self._meta_map: EntryLogMetadataMap | None = None
        self._run_lock = trio.Lock()
        self._wake = trio.Event()
        self._forced: tuple[bool, bool] | None = None
        self._limiter = trio.CapacityLimiter(1)
        self._stop = threading.Event()  # ends a compaction copy early (shutdown)
        self._corrupt_checked: tuple[frozenset[int], int] | None = None  # see _release_corrupt_logs

    def stop(self) -> None:
        """Abort a compaction in progress (its copy is discarded; the old log stays)."""
        self._stop.set()

    @property
    def dir(self) -> "DirStorage":
        return self.storage.dirs[self.dir_index]

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> None:
        """Load the persisted entry-log metadata (blocking)."""
        self._meta_map = EntryLogMetadataMap(self.dir.current / META_DB)
        self.metas = self._meta_map.load_all()
        on_disk = set(list_log_ids(self.dir.current))
        for log_id in [i for i in self.metas if i not in on_disk]:
            del self.metas[log_id]  # its log was deleted (crash before the metadata went)
            self._meta_map.delete(log_id)

    def close(self) -> None:
        if self._meta_map is not None:
            self._meta_map.close()
            self._meta_map = None

    @property
    def in_force_gc(self) -> bool:
        return self._forced is not None or self.status.force_compacting

    def trigger(self, force_major: bool = False, force_minor: bool = False) -> None:
        """Ask for a forced run as soon as possible (PUT /api/v1/bookie/gc)."""
        major, minor = self._forced or (False, False)
        self._forced = (major or force_major or not force_minor, minor or force_minor)
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every gc_wait_time_ms (first run staggered per dir) until cancelled."""
        try:
            await trio.to_thread.run_sync(self.open)
        except Exception as exc:  # rocksdb errors have no common base class
            if not is_disk_full(exc):
                raise
            # A bookie must start on a full disk (read-only); each run retries the open.
            log.warning("entry-log metadata of %s not opened (%s); GC waits for disk space", self.dir.current, exc)
            await trio.to_thread.run_sync(self.close)
        task_status.started()
        try:
            wait = self.config.gc_wait_time_ms / 1000.0
            first = wait * (1 + self.dir_index) / (1 + len(self.storage.dirs))
            with trio.move_on_after(first):
                await self._wake.wait()
            while True:
                self._wake = trio.Event()
                forced, self._forced = self._forced, None
                self.status.force_compacting = forced is not None
                try:
                    if forced is None:
                        await self.run_once()
                    else:
                        await self.run_once(force=True, force_major=forced[0], force_minor=forced[1])
                except Exception:
                    # Never let one failure stop the task (BookKeeper #2103): next run retries.
                    self.failed_runs += 1
                    log.exception("garbage collection of %s failed; retrying next run", self.dir.current)
                finally:
                    self.status.force_compacting = False
                with trio.move_on_after(wait):
                    await self._wake.wait()
        finally:
            with trio.CancelScope(shield=True):
                async with self._run_lock:
                    await trio.to_thread.run_sync(self.close)

    # --- one run --------------------------------------------------------------------------------

    async def run_once(self, force: bool = False, force_major: bool = False, force_minor: bool = False) -> None:
        async with self._run_lock:
            if self._meta_map is None:
                await trio.to_thread.run_sync(self.open)
            if self.store is not None:
                try:
                    await self.gc_ledgers()
                except MetadataError as exc:
                    log.warning("ledger GC skipped: metadata store: %s", exc)
            started = time.monotonic()
            reclaimed_before = self._reclaimed_total()
            dead = self._dead_ledgers()
            await trio.to_thread.run_sync(self._gc_entry_logs, dead, limiter=self._limiter)
            await self._release_corrupt_logs(dead)
            await self._compact(force, force_major, force_minor)
            await trio.to_thread.run_sync(self._publish_metrics, limiter=self._limiter)
            self.runs += 1
            # One line per run, so an operator sees GC is alive and what it gave back.
            log.info("GC run %d on %s%s: %d deleted ledgers, %d bytes reclaimed, %.2f s", self.runs, self.dir.current,
                     " (forced)" if force else "", len(dead), self._reclaimed_total() - reclaimed_before,
                     time.monotonic() - started)

    def _reclaimed_total(self) -> float:
        """Bytes this process reclaimed so far (all reasons), from the metric's samples."""
        total = 0.0
        for metric in self.metrics.gc_reclaimed_bytes.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
        return total

    def _dead_ledgers(self) -> set[int]:
        return {lid for lid, st in self.storage.states.items() if st.deleted}

    # --- 1. ledgers -----------------------------------------------------------------------------

    async def gc_ledgers(self) -> list[int]:
        """Tombstone this dir's local ledgers that the metadata store no longer has."""
        assert self.store is not None
        n, idx = len(self.storage.dirs), self.dir_index
        # Snapshot first: anything created after this line is not a candidate.
        local = {lid for lid, st in list(self.storage.states.items()) if not st.deleted and lid % n == idx}
        if not local:
            return []
        present: set[int] = set()
        async for lid in iter_ledger_ids(self.store):
            if lid in local:
                present.add(lid)
        deleted = []
        for lid in sorted(local - present):
            if await self.store.exists(ledger_path(lid)) is not None:
                continue  # listed while being created or a listing glitch: keep it
            deleted.append(lid)
        if deleted:
            await self.storage.tombstone(deleted)
            self.metrics.gc_deleted_ledgers.inc(len(deleted))
            log.info("GC: %d ledgers deleted from the metadata store dropped locally: %s", len(deleted), deleted[:50])
        return deleted

    # --- 2-3. entry-log metadata and deletion -----------------------------------------------------

    def _gc_entry_logs(self, dead: set[int]) -> None:
        d = self.dir
        logger = d.entry_logger
        logger.close_retired_fds()
        on_disk = set(list_log_ids(d.current))
        busy = logger.busy_ids()  # after the listing: see EntryLogger
        assert self._meta_map is not None
        for log_id in sorted(on_disk - busy - set(self.metas) - set(self.corrupt)):
            meta = self._extract(log_id)
            if meta is not None:
                self.metas[log_id] = meta
                self._meta_map.put(meta)
        for log_id in [i for i in self.metas if i not in on_disk]:
            del self.metas[log_id]  # deleted by hand or by an earlier run that crashed
            self._meta_map.delete(log_id)
        for log_id in [i for i in self.corrupt if i not in on_disk]:
            del self.corrupt[log_id]
        for log_id, meta in sorted(self.metas.items()):
            if log_id in busy:
                continue
            removed = meta.remove_ledgers(dead)
            if not meta.ledgers:
                self._delete_log(log_id, "deletion")
            elif removed:
                self._meta_map.put(meta)

    def _extract(self, log_id: int) -> EntryLogMetadata | None:
        path = self.dir.current / elf.file_name(log_id)
        try:
            if os.path.getsize(path) <= elf.HEADER_SIZE:
                return EntryLogMetadata(log_id)  # no record fits: an empty log (crash at creation)
            meta, from_map = read_metadata(path, log_id)
        except FileNotFoundError:
            return None
        except (OSError, FormatError) as exc:
            self._report_corrupt(log_id, str(exc))
            return None
        if meta.corrupt:
            self._report_corrupt(log_id, meta.corrupt)
            return None
        if not from_map:
            log.info("entry log %x has no usable ledgers map: scanned (%d ledgers)", log_id, len(meta.ledgers))
        return meta

    async def _release_corrupt_logs(self, dead: set[int]) -> None:
        """Delete the corrupt logs the index no longer points into for a live ledger.

        A corrupt log (a bad record before its end: a garbage tail left by a crash, bit rot) is
        never compacted, and its metadata is unknown past the bad record. Reads find entries
        only through the index, so once no live ledger's location points into the log, nothing
        readable is left in it. The full index scan runs again only when the corrupt logs or the
        dead ledgers changed since the last one (index entries into a rotated log only go away,
        with their ledgers' tombstones)."""
        busy = self.dir.entry_logger.busy_ids()
        candidates = {i for i in self.corrupt if i not in busy}
        key = (frozenset(candidates), len(dead))
        if not candidates or key == self._corrupt_checked:
            return
        referenced = await self.storage.logs_referenced(self.dir_index, candidates, dead)
        self._corrupt_checked = key
        free = sorted(candidates - referenced)
        if not free:
            return

        def delete() -> None:
            for log_id in free:
                log.warning("corrupt entry log %x in %s holds no entry the index points at: deleted",
                            log_id, self.dir.current)
                self.corrupt.pop(log_id, None)
                self._delete_log(log_id, "corrupt")
            self.metrics.gc_corrupt_entry_logs.set(len(self.corrupt))

        await trio.to_thread.run_sync(delete, limiter=self._limiter)

    def _report_corrupt(self, log_id: int, why: str) -> None:
        log.error("entry log %x in %s is corrupt (%s): skipped by GC and compaction", log_id, self.dir.current, why)
        self.corrupt[log_id] = why
        self.metrics.gc_corrupt_entry_logs.set(len(self.corrupt))

    def _delete_log(self, log_id: int, reason: str) -> None:
        path = self.dir.current / elf.file_name(log_id)
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            size = 0
        assert self._meta_map is not None
        # The persisted metadata goes first: a crash in between leaves a log without metadata
        # (scanned again), never metadata naming a file that may later be a different log.
        self._meta_map.delete(log_id)
        try:
            self.dir.entry_logger.retire_log(log_id)
        except OSError as exc:
            # Metadata kept: the next run retries (BookKeeper #3965).
            log.warning("deleting entry log %x failed (retried next run): %s", log_id, exc)
            self.metrics.gc_failed_deletes.inc()
            meta = self.metas.get(log_id)
            if meta is not None:
                self._meta_map.put(meta)
            return
        self.metas.pop(log_id, None)
        self.metrics.gc_deleted_entry_logs.inc()
        self.metrics.gc_reclaimed_bytes.labels(reason).inc(size)
        log.info("entry log %x deleted (%s, %d bytes)", log_id, reason, size)

    # --- 4. compaction ----------------------------------------------------------------------------

    def disk_used_fraction(self) -> float:
        free, total = self.storage.disk_usage()
        return 1.0 - free / total if total else 0.0

    def _allowed(self, force: bool) -> tuple[bool, bool]:
        """(major allowed, minor allowed) under disk pressure and the suspend flags."""
        cfg = self.config
        major, minor = not self.suspend_major, not self.suspend_minor
        used = self.disk_used_fraction()
        if used >= cfg.disk_usage_threshold and not cfg.is_force_gc_allow_when_no_space and not force:
            return False, False
        if used >= cfg.disk_usage_warn_threshold and not cfg.is_force_gc_allow_when_no_space and not force:
            return False, minor
        return major, minor

    async def _compact(self, force: bool, force_major: bool, force_minor: bool) -> None:
        cfg = self.config
        major_ok, minor_ok = await trio.to_thread.run_sync(self._allowed, force, limiter=self._limiter)
        now = time.time()
        st = self.status
        if (
            major_ok
            and cfg.major_compaction_threshold > 0
            and (force_major or (not force_minor and force) or now - self._last_major >= cfg.major_compaction_interval > 0)
        ):
            st.major_compacting = True
            try:
                await self.compact(cfg.major_compaction_threshold, cfg.major_compaction_max_time_millis)
            finally:
                st.major_compacting = False
            self._last_major = self._last_minor = time.time()
            st.last_major_compaction_time = st.last_minor_compaction_time = int(self._last_major * 1000)
            st.major_compaction_counter += 1
        elif (
            minor_ok
            and cfg.minor_compaction_threshold > 0
            and (force_minor or force or now - self._last_minor >= cfg.minor_compaction_interval > 0)
        ):
            st.minor_compacting = True
            try:
                await self.compact(cfg.minor_compaction_threshold, cfg.minor_compaction_max_time_millis)
            finally:
                st.minor_compacting = False
            self._last_minor = time.time()
            st.last_minor_compaction_time = int(self._last_minor * 1000)
            st.minor_compaction_counter += 1

    async def compact(self, threshold: float, max_time_ms: int) -> int:
        """Compact the logs under ``threshold`` usage, lowest first; returns how many."""
        cfg = self.config
        d = self.dir
        busy = d.entry_logger.busy_ids()
        candidates = sorted(
            (m for i, m in self.metas.items() if i not in busy and i not in self.corrupt and m.total_size and m.usage < threshold),
            key=lambda m: m.usage,
        )
        deadline = time.monotonic() + max_time_ms / 1000.0 if max_time_ms > 0 else None
        by_bytes = cfg.is_throttle_by_bytes
        throttle = compactor.Throttle(cfg.compaction_rate_by_bytes if by_bytes else cfg.compaction_rate_by_entries, self._stop)
        done = 0
        for meta in candidates:
            if deadline is not None and time.monotonic() > deadline:
                break
            try:
                await self._compact_one(meta, throttle, by_bytes, deadline)
            except compactor.CompactionAborted as exc:
                log.info("%s", exc)
                break
            except (BookieIOError, OSError, FormatError) as exc:
                self._report_corrupt(meta.log_id, str(exc))
                continue  # the other logs still get compacted (BookKeeper #4596)
            done += 1
        return done

    async def _compact_one(self, meta: EntryLogMetadata, throttle: compactor.Throttle, by_bytes: bool, deadline: float | None) -> None:
        d = self.dir
        old_id = meta.log_id
        storage = self.storage
        states = storage.states

        def is_live(lid: int) -> bool:
            st = states.get(lid)
            return st is None or not st.deleted

        old_size = os.path.getsize(d.current / elf.file_name(old_id))
        t0 = time.monotonic()
        new_id = await trio.to_thread.run_sync(d.entry_logger.allocate_log_id, limiter=self._limiter)
        copy = await trio.to_thread.run_sync(
            compactor.copy_live_entries, d.current, meta, new_id, d.locations, is_live, throttle, by_bytes, deadline,
            limiter=self._limiter,
        )
        if copy is None:
            await trio.to_thread.run_sync(self._delete_log, old_id, "compaction", limiter=self._limiter)
            return
        d.entry_logger.install_read_fd(new_id, copy.path)
        # Under the flush lock: no checkpoint writes a location between our check and put.
        await storage.run_locked_index_update(compactor.update_index, d.locations, old_id, copy.moved)

        def finish() -> None:
            compactor.finish(d.current, copy, self._retire_for_compaction)
            new_meta = copy.metadata()
            self.metas[new_id] = new_meta
            assert self._meta_map is not None
            self._meta_map.put(new_meta)

        await trio.to_thread.run_sync(finish, limiter=self._limiter)
        new_size = os.path.getsize(d.current / elf.file_name(new_id))
        self.metrics.gc_reclaimed_bytes.labels("compaction").inc(max(0, old_size - new_size))
        self.metrics.gc_compacted_entry_logs.inc()
        self.metrics.gc_compaction_read_bytes.inc(old_size)
        self.metrics.gc_compaction_written_bytes.inc(new_size)
        self.metrics.gc_compaction_seconds.inc(time.monotonic() - t0)
        log.info(
            "entry log %x compacted into %x: %d entries, %d -> %d bytes", old_id, new_id, len(copy.moved), old_size, new_size
        )

    def _retire_for_compaction(self, log_id: int) -> None:
        assert self._meta_map is not None
        self._meta_map.delete(log_id)  # first, as in _delete_log
        self.metas.pop(log_id, None)
        self.dir.entry_logger.retire_log(log_id)  # an OSError aborts; recovery/next run finishes
        self.metrics.gc_deleted_entry_logs.inc()

    # --- reporting --------------------------------------------------------------------------------

    def entry_log_report(self) -> list[dict[str, object]]:
        """Every entry log of the dir: ledgers, usage, age (blocking; bookie-shell and metrics)."""
        d = self.dir
        now = time.time()
        out = []
        for log_id in list_log_ids(d.current):
            path = d.current / elf.file_name(log_id)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            meta = self.metas.get(log_id)
            out.append(
                {
                    "logId": log_id,
                    "size": st.st_size,
                    "ageSeconds": max(0.0, now - st.st_mtime),
                    "current": log_id == d.entry_logger.log_id,
                    "corrupt": self.corrupt.get(log_id, ""),
                    "ledgers": sorted(meta.ledgers) if meta else None,
                    "usage": meta.usage if meta else None,
                }
            )
        return out

    def _publish_metrics(self) -> None:
        report = self.entry_log_report()
        m = self.metrics
        label = str(self.dir.current)
        m.entry_logs.labels(label).set(len(report))
        m.oldest_entry_log_age.labels(label).set(max((r["ageSeconds"] for r in report), default=0.0))  # type: ignore[type-var, arg-type]
        buckets = [0] * 10
        for r in report:
            if r["usage"] is not None:
                buckets[min(9, int(float(r["usage"]) * 10))] += 1  # type: ignore[arg-type]
        for i, n in enumerate(buckets):
            m.entry_log_usage.labels(label, f"{(i + 1) / 10:.1f}").set(n)
