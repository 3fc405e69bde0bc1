"""The journal: append records, group-commit them with one write + one fdatasync per group.

Callers append synchronously (no await, no task per entry) with a completion callback, or
(adds) with an ack token that ``on_durable`` receives together with the rest of its group; the
writer task (:meth:`Journal.run`, owned by the bookie's nursery) gathers everything pending
into a group, waiting at most ``journal_max_group_wait_ms`` after the group's first record
unless ``journal_buffered_writes_threshold`` bytes are already buffered (or immediately with
``journal_flush_when_queue_empty``, the default: adaptive group commit), then writes the
group durably (RWF_DSYNC, or write + fdatasync): a small group (a lone add) in the writer
task itself, a large one in the journal's worker thread. While a group is written the next
one accumulates, so groups form only under load. Callbacks of a group run in bulk, in
order, only after its durable write: an add is acknowledged only once it is durable.

A fresh file is started at every open and whenever ``journal_max_size_mb`` is reached. Files
are preallocated (fallocate) in ``journal_pre_alloc_size_mb`` chunks so a group's fdatasync
only flushes data, not block allocations, and so a torn tail reads as zeros; when the disk is
short of space only what a group needs is allocated, and a file that is closed or rolled, or
left by an earlier run, is truncated to its records (its unused preallocation returned).

A group that fails for lack of space fails its records (DiskFullError) and reports it through
``on_disk_full`` (the bookie turns read-only); the journal stays usable, the next group is
written at the same position once there is room. Any other write error fails the journal.
"""

from __future__ import annotations

import logging
import mmap
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import outcome
import trio

from quire import hop_trace
from bookie import journal_format as jf
from bookie.config import MB, BookieConfig
from bookie.errors import BookieIOError, DiskFullError, JournalError, is_disk_full
from bookie.file_io import drop_cached, write_all_at, write_all_at_durable
from bookie.log_mark import LogMark, fsync_dir
from bookie.metrics import BookieMetrics
from quire import input_batch
from quire.lazy_event import LazyEvent
from quire.outbox import deferred_writes

log = logging.getLogger(__name__)

_record_prefix = jf.record_prefix  # the record framing of journal_format, bound once for the add path

# Called once the record is durable (None) or failed to be written (the error).
Callback = Callable[[BaseException | None], None]


def list_journal_ids(current_dir: Path) -> list[int]:
    ids = []
    for name in os.listdir(current_dir):
        fid = jf.parse_file_name(name)
        if fid is not None:
            ids.append(fid)
    return sorted(ids)


class _GroupWriterThread:
    """The journal's own worker thread for group writes.

    A group commit is on every add's path, and handing it to this thread and back costs about
    half of ``trio.to_thread.run_sync`` (no thread-cache lookup, limiter or context copy:
    measured ~90 vs ~175 µs of CPU per group here). Started by the writer task on its first
    group, stopped when the writer task ends. Like ``to_thread.run_sync``, a call cannot be
    cancelled: the write is in progress either way.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    async def run(self, fn: Callable[..., LogMark], *args: object) -> LogMark:
        if self._thread is None:
            self._token = trio.lowlevel.current_trio_token()
            self._thread = threading.Thread(target=self._loop, name="journal-writer", daemon=True)
            self._thread.start()
        self._jobs.put((fn, args, trio.lowlevel.current_task()))
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)

    def _loop(self) -> None:
        token = self._token
        assert token is not None
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, task = job
            result = outcome.capture(fn, *args)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
            except trio.RunFinishedError:
                return

    def stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None


@dataclass
class _JournalFile:
    file_id: int
    fd: int
    position: int
    prealloc_end: int
    dropped_to: int = 0  # pages below this offset were dropped from the page cache


class Journal:
    """One journal directory: a writer task with group commit, plus replay and cleanup."""

    def __init__(self, config: BookieConfig, metrics: BookieMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.current_dir = Path(config.journal_directory) / "current"
        self._pending: list[bytes | bytearray | memoryview] = []  # record prefix, payload, prefix, payload, ...
        self._pending_cbs: list[Callback] = []
        self._pending_acks: list[object] = []
        # Receives the ack tokens of each durable (or failed) group in one call: per-group,
        # not per-record, work for the hot path (see append_ack).
        self.on_durable: Callable[[list, BaseException | None], None] = lambda tokens, err: None
        # Told (with the reason) when a group could not be written for lack of disk space.
        self.on_disk_full: Callable[[str], None] = lambda reason: None
        self._pending_bytes = 0
        self._pending_since = 0.0
        self._wakeup = trio.Event()
        self._space = LazyEvent()  # set per group; an Event only while a caller waits for space
        self._full = trio.Event()
        # True once _wakeup or _full may have been set since the last group was taken (every
        # set() below sets it first): _take_group replaces a set event only then, and a group
        # started by a reader's input batch (nothing set) costs no Event.is_set() calls.
        self._signalled = False
        self._threshold = config.journal_buffered_writes_threshold
        self._file: _JournalFile | None = None
        self._limiter = trio.CapacityLimiter(1)
        self._writer = _GroupWriterThread()
        self._closed = False
        self._failed: BaseException | None = None
        # Position of the last fsynced byte: what a checkpoint may use as its LogMark.
        self.durable_mark = LogMark()
        self._max_bytes_pending = config.journal_max_memory_size_mb * MB
        self._max_bufs_pending = 2 * config.journal_queue_size  # two buffers per record
        self._sync_ewma = 0.0  # recent durable-write latency (s), moving average
        # The last group's write + sync alone, timed around the system call by whichever thread
        # made it: the hand-off to the worker thread and back, and the wait for the GIL after
        # it, are not the disk's (counted in, they kept the journal in its thread mode under
        # load: 30-40% of a cluster bookie's groups "over 1 ms" where the syscall took 4%).
        self._sync_took = 0.0
        self._writer_idle = False  # the writer task waits for a first record (sync, adaptive)

    # --- setup -----------------------------------------------------------------------------

    def open_new_file(self) -> LogMark:
        """Start a new journal file (id = max existing + 1); returns its first position."""
        self.current_dir.mkdir(parents=True, exist_ok=True)
        ids = list_journal_ids(self.current_dir)
        file_id = (ids[-1] + 1) if ids else 1
        self._open_file(file_id)
        return self.durable_mark

    def _open_file(self, file_id: int) -> None:
        path = self.current_dir / jf.file_name(file_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            header = jf.encode_header(file_id)
            os.write(fd, header)
            jf_file = _JournalFile(file_id, fd, len(header), len(header))
            self._preallocate(jf_file)
            os.fsync(fd)
            fsync_dir(self.current_dir)
        except BaseException:
            os.close(fd)
            _unlink_quietly(path)  # holds nothing yet
            raise
        self._file = jf_file
        self.durable_mark = LogMark(file_id, len(header))

    def _preallocate(self, f: _JournalFile, need: int = 0) -> None:
        chunk = self.config.journal_pre_alloc_size_mb * MB
        if chunk <= 0:
            f.prealloc_end = 1 << 62
            return
        free = _free_bytes(self.current_dir)
        if free < 4 * chunk:
            # Short of space: allocate only what this write needs, so a restart or a roll
            # does not take the last megabytes of the disk for zeros.
            chunk = max(-(-need // _SMALL_PREALLOC) * _SMALL_PREALLOC, _SMALL_PREALLOC)
        # fallocate: the blocks are allocated up front (a group's fdatasync then carries no
        # allocation metadata) and read back as zeros, so a torn tail ends in zeros. Writing
        # real zeros instead would double the bytes the disk has to absorb.
        try:
            os.posix_fallocate(f.fd, f.prealloc_end, chunk)
        except OSError as exc:
            if is_disk_full(exc):
                raise
            os.pwrite(f.fd, b"\0", f.prealloc_end + chunk - 1)  # no fallocate: extend the size
        f.prealloc_end += chunk

    # --- appending -------------------------------------------------------------------------

    @property
    def congested(self) -> bool:
        """True while the pending group is over its bounds: callers await wait_for_space()."""
        return len(self._pending) >= self._max_bufs_pending or self._pending_bytes >= self._max_bytes_pending

    async def wait_for_space(self) -> None:
        while self.congested and not self._closed:
            await self._space.wait()

    def append(self, payload: bytes | bytearray | memoryview, callback: Callback | None) -> None:
        """Queue one record; ``callback`` runs after the group holding it is fsynced."""
        if self._failed is not None:
            if callback is not None:
                callback(self._failed)
            return
        n = len(payload)
        prefix = _record_prefix(payload)
        if not self._pending:
            self._pending_since = time.monotonic()
            self._signalled = True
            self._wakeup.set()
        self._pending.append(prefix)
        self._pending.append(payload)
        if callback is not None:
            self._pending_cbs.append(callback)
        self._pending_bytes += n + 8
        if self._pending_bytes >= self._threshold:
            self._signalled = True
            self._full.set()

    def append_ack(self, payload: bytes, token: object) -> None:
        """Queue one record whose durability is reported through ``on_durable``: the tokens
        of a whole group are handed over in one call after its fsync (the add hot path)."""
        if self._failed is not None:
            self.on_durable([token], self._failed)
            return
        n = len(payload)
        pending = self._pending
        if not pending:
            self._pending_since = time.monotonic()
            # A SEND decoded by a broker reader: the reader writes the group when its batch
            # of input ends (quire/input_batch.py), no writer-task round trip.
            if not (self._writer_idle and input_batch.defer(self)):
                self._signalled = True
                self._wakeup.set()
        pending.append(_record_prefix(payload))
        pending.append(payload)
        self._pending_acks.append(token)
        self._pending_bytes += n + 8
        if self._pending_bytes >= self._threshold:
            self._signalled = True
            self._full.set()

    async def append_and_wait(self, payload: bytes) -> None:
        """Append one record and wait until it is durable (meta records, replies that need it)."""
        done = trio.Event()
        result: list[BaseException | None] = []

        def cb(err: BaseException | None) -> None:
            result.append(err)
            done.set()

        await self.wait_for_space()
        self.append(payload, cb)
        await done.wait()
        if result[0] is not None:
            raise BookieIOError(f"journal write failed: {result[0]}")

    # --- the writer task -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Group-commit loop; runs until cancelled, then flushes what is pending."""
        cfg = self.config
        max_wait = max(cfg.journal_max_group_wait_ms, 0) / 1000.0
        flush_when_empty = cfg.journal_flush_when_queue_empty or max_wait <= 0
        threshold = cfg.journal_buffered_writes_threshold
        page_cache_interval = cfg.journal_page_cache_flush_interval_ms / 1000.0
        last_sync = time.monotonic()
        task_status.started()
        try:
            while True:
                if not self._pending:
                    if cfg.journal_sync_data:
                        # Idle: a reader's batch may write the next group itself
                        # (flush_deferred) while this task stays parked.
                        self._writer_idle = flush_when_empty
                        try:
                            await self._wakeup.wait()
                        finally:
                            self._writer_idle = False
                    else:
                        with trio.move_on_after(page_cache_interval):
                            await self._wakeup.wait()
                        if not self._pending:
                            if time.monotonic() - last_sync >= page_cache_interval:
                                await self._sync_only()
                                last_sync = time.monotonic()
                            continue
                    if not self._pending:
                        self._wakeup = trio.Event()
                        continue
                    # (the set _wakeup is replaced by _flush_group: one Event per group)
                if flush_when_empty:
                    # Adaptive group commit: write at once (groups form while a write is in
                    # progress). A group for the thread first lets the tasks runnable now (a
                    # decoded batch of SENDs) append too.
                    if not self._inline_ok():
                        await trio.sleep(0)
                elif self._pending_bytes < threshold:
                    # Wait for the group to age max_wait or to reach the byte threshold.
                    remaining = self._pending_since + max_wait - time.monotonic()
                    if remaining > 0:
                        with trio.move_on_after(remaining):
                            await self._full.wait()
                else:
                    await trio.sleep(0)
                sync = cfg.journal_sync_data
                if not sync and time.monotonic() - last_sync >= page_cache_interval:
                    sync = True
                await self._flush_group(sync)
                if sync:
                    last_sync = time.monotonic()
        finally:
            with trio.CancelScope(shield=True):
                if self._pending and self._failed is None:
                    await self._flush_group(True)
            self._writer.stop()

    def _take_group(self) -> tuple[list, list[Callback], list, int]:
        """The pending records as the next group; the pending lists start over."""
        group = self._pending, self._pending_cbs, self._pending_acks, self._pending_bytes
        self._pending, self._pending_cbs, self._pending_acks, self._pending_bytes = [], [], [], 0
        # Fresh events (only for one that was set: an Event costs a few µs per group):
        # appends made while this group is written signal the next group.
        if self._signalled:
            self._signalled = False
            if self._wakeup.is_set():
                self._wakeup = trio.Event()
            if self._full.is_set():
                self._full = trio.Event()
        self._space.set()
        return group

    async def _flush_group(self, sync: bool) -> None:
        bufs, cbs, acks, nbytes = self._take_group()
        err: BaseException | None = None
        mark = self.durable_mark
        try:
            if sync and self._inline_ok(nbytes):
                # A small group (a lone add) is written and made durable right here, blocking
                # the event loop for that one write (as Redis' appendfsync always does): the
                # hand-off to the writer thread and back costs more CPU than the write itself.
                # Only while durable writes are fast: on a slow or busy disk the loop must go on.
                mark = self._write_group(bufs, sync, nbytes)
            else:
                mark = await self._writer.run(self._write_group, bufs, sync, nbytes)
        except Exception as exc:
            err = self._group_failed(exc)
        self._group_done(bufs, cbs, acks, nbytes, sync, mark, err)

    def flush_deferred(self) -> None:
        """End of a reader's input batch (quire/input_batch.py): write the group its appends
        started, here, as the writer task would inline; or wake the writer task when the
        group is for the writer thread (too large, or durable writes are slow now)."""
        if not self._pending:
            return
        # (_inline_ok, inlined: once per unbatched add)
        if not (self._writer_idle and self._pending_bytes <= _INLINE_WRITE_MAX
                and self._sync_ewma <= _INLINE_MAX_SYNC_S and self._file is not None):
            self._signalled = True
            self._wakeup.set()
            return
        bufs, cbs, acks, nbytes = self._take_group()
        err: BaseException | None = None
        mark = self.durable_mark
        try:
            mark = self._write_group(bufs, True, nbytes)
        except Exception as exc:
            err = self._group_failed(exc)
        self._group_done(bufs, cbs, acks, nbytes, True, mark, err)

    def _group_failed(self, exc: Exception) -> BaseException:
        """The error a group's records get for a failed write (the journal fails for good
        unless the disk was full)."""
        if is_disk_full(exc):
            # Nothing of this group counts; the next one is written at the same position.
            log.error("journal out of disk space, failing this group: %s", exc)
            self.on_disk_full(f"journal: {exc}")
            return DiskFullError(f"journal: {exc}")
        # an I/O error or a bug: nothing more can be made durable
        log.error("journal write failed, failing all further appends: %r", exc)
        self._failed = exc
        return exc

    def _group_done(self, bufs: list, cbs: list[Callback], acks: list, nbytes: int, sync: bool,
                    mark: LogMark, err: BaseException | None) -> None:
        if err is None and sync:
            self.durable_mark = mark
            took = self._sync_took
            self.metrics.journal_sync_seconds.observe(took)
            self._sync_ewma += 0.2 * (took - self._sync_ewma)
        self.metrics.journal_group_entries.observe(len(bufs) // 2)
        self.metrics.journal_group_bytes.observe(nbytes)
        # The replies and receipts of the whole group leave in one write per connection when
        # the completions are done (no writer task woken per connection).
        with deferred_writes():
            if acks:
                try:
                    self.on_durable(acks, err)
                except Exception:  # a reply bug must not stop the journal (and every later add)
                    log.exception("journal completion handler failed")
            for cb in cbs:
                cb(err)

    def _write_group(self, bufs: list, sync: bool, size: int) -> LogMark:
        """Worker thread: one write (+ preallocation) and one fdatasync; maybe roll the file.
        ``size``: the bytes of ``bufs`` (the group's ``_pending_bytes``: 8 + len per record)."""
        if hop_trace.ENABLED:
            hop_trace.mark("k.flush", len(bufs) // 2)
        if self._file is None:
            self.open_new_file()  # none could be created at start (disk full): try now
        f = self._file
        assert f is not None
        while f.position + size > f.prealloc_end:
            self._preallocate(f, f.position + size - f.prealloc_end)
        if sync:
            t0 = time.perf_counter()
            f.position += write_all_at_durable(f.fd, bufs, f.position, size)
            if self.config.journal_test_sync_delay_ms:  # a slow disk, injected by a test
                time.sleep(self.config.journal_test_sync_delay_ms / 1000)
            self._sync_took = time.perf_counter() - t0
            if self.config.journal_remove_pages_from_cache:
                # As BookKeeper: dropped only once they are _CACHE_DROP_LAG behind the write
                # position (a page still being filled is not dropped and read back), and here
                # in steps of _CACHE_DROP_STEP: one fadvise per group cost a system call per
                # unbatched add.
                f.dropped_to = drop_cached(f.fd, f.dropped_to, f.position - _CACHE_DROP_LAG, _CACHE_DROP_STEP)
        else:
            f.position += write_all_at(f.fd, bufs, f.position)
        mark = LogMark(f.file_id, f.position)
        if sync and f.position >= self.config.journal_max_size_mb * MB:
            try:
                self._open_file(f.file_id + 1)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                # The group is durable; keep appending to this file and roll later.
                log.warning("journal roll postponed: %s", exc)
                return mark
            _close_trimmed(f)
            mark = self.durable_mark
        return mark

    def _inline_ok(self, nbytes: int = -1) -> bool:
        """May the next group be written in the writer task itself (see _flush_group)?"""
        if nbytes < 0:
            nbytes = self._pending_bytes
        return nbytes <= _INLINE_WRITE_MAX and self._sync_ewma <= _INLINE_MAX_SYNC_S and self._file is not None

    async def _sync_only(self) -> None:
        f = self._file
        if f is None:
            return
        await trio.to_thread.run_sync(os.fdatasync, f.fd, limiter=self._limiter)
        self.durable_mark = LogMark(f.file_id, f.position)

    async def flush(self) -> LogMark:
        """Make everything appended so far durable; returns the durable mark."""
        if self._pending:
            await self.append_and_wait(jf.NOOP_PAYLOAD)
        elif not self.config.journal_sync_data:
            await self._sync_only()
        return self.durable_mark

    def close(self) -> None:
        self._closed = True
        self._space.set()
        if self._file is not None:
            _close_trimmed(self._file)
            self._file = None

    # --- cleanup and replay ----------------------------------------------------------------

    def gc_journals(self, mark: LogMark) -> list[int]:
        """Delete journals older than the mark beyond journal_max_backups; returns their ids."""
        older = [i for i in list_journal_ids(self.current_dir) if i < mark.file_id]
        keep = self.config.journal_max_backups
        doomed = older[: max(len(older) - keep, 0)]
        for fid in doomed:
            try:
                os.unlink(self.current_dir / jf.file_name(fid))
            except FileNotFoundError:
                pass
        return doomed


_SMALL_PREALLOC = 64 * 1024
# journal_remove_pages_from_cache: BookKeeper keeps the last 8 MB written in the page cache.
_CACHE_DROP_LAG = 8 * MB
_CACHE_DROP_STEP = 1 * MB
# Groups up to this size are written by the writer task itself, larger ones by the writer
# thread (the event loop goes on meanwhile). A durable write of a few KiB takes about as long
# as the thread hand-off's wake-ups; a large group's write is worth overlapping.
_INLINE_WRITE_MAX = 16 * 1024
# ... and only while durable writes take at most this long on average (a slow or contended
# disk would stall every connection of the process for each write).
_INLINE_MAX_SYNC_S = 0.001


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _close_trimmed(f: _JournalFile) -> None:
    """Close a journal file, first giving back its unused preallocated tail."""
    try:
        os.ftruncate(f.fd, f.position)
    except OSError as exc:
        log.warning("journal %s: could not trim its preallocation: %s", jf.file_name(f.file_id), exc)
    os.close(f.fd)


def trim_preallocated(current_dir: Path, below: int) -> int:
    """Truncate journal files with ids below ``below`` to their last good record when their
    tail is unused preallocation (zeros) left by a crash or an older version; returns the
    bytes given back. A file whose scan ends in a corrupt record is left as it is."""
    freed = 0
    if not current_dir.exists():
        return 0
    for fid in list_journal_ids(current_dir):
        if fid >= below:
            continue
        path = current_dir / jf.file_name(fid)
        size = path.stat().st_size
        # Trimmed files end at a record; preallocated ones at a whole chunk of zeros.
        if size <= jf.HEADER_SIZE or (size - jf.HEADER_SIZE) % _SMALL_PREALLOC:
            continue
        # Mapped, not read: an old rolled file may be gigabytes (scanned once, then trimmed).
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            data = memoryview(mm)
            try:
                result = jf.ScanResult(jf.HEADER_SIZE, "eof")
                try:
                    jf.decode_header(data)
                    for _ in jf.scan(data, jf.HEADER_SIZE, result):
                        pass
                except Exception:
                    continue
                end = result.end_offset
                if result.reason not in ("zeros", "eof") or end >= size:
                    continue
                # Only zeros after the last record (else keep the file for inspection).
                if any(data[i : i + MB].tobytes().strip(b"\0") for i in range(end, size, MB)):
                    continue
            finally:
                data.release()
        os.truncate(path, end)
        freed += size - end
    return freed


def replay_records(current_dir: Path, mark: LogMark) -> Iterator[jf.Record]:
    """Every valid record after the LogMark, file by file, stopping at each file's bad tail.

    Raises JournalError if the file the mark points into is missing (BookKeeper refuses to
    start then too: the data between the mark and the next file would be silently lost).
    """
    if not current_dir.exists():
        return
    ids = [i for i in list_journal_ids(current_dir) if i >= mark.file_id]
    if mark.file_id > 0 and (not ids or ids[0] != mark.file_id):
        raise JournalError(f"recovery journal {jf.file_name(mark.file_id)} named by the last mark {mark} is missing")
    for fid in ids:
        path = current_dir / jf.file_name(fid)
        data = path.read_bytes()
        try:
            jf.decode_header(data)
        except Exception as exc:
            # A file whose header never reached the disk holds nothing acknowledged.
            log.warning("skipping journal %s: %s", path.name, exc)
            continue
        start = mark.offset if fid == mark.file_id and mark.offset >= jf.HEADER_SIZE else jf.HEADER_SIZE
        result = jf.ScanResult(start, "eof")
        yield from jf.scan(data, start, result)
        if result.reason in ("torn", "corrupt"):
            log.warning("journal %s: stopped replay at offset %d (%s tail)", path.name, result.end_offset, result.reason)
