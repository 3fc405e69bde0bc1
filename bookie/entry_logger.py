"""EntryLogger: appends checkpointed entries to interleaved entry logs in one ledger dir.

All methods block (file I/O) and are called from worker threads: writes only from the
checkpoint (one at a time), reads from any read thread. A log is rotated when the next record
would pass ``log_size_limit``; the rotated log gets its ledgers map appended, its header
patched and is fsynced. Every start opens a new log (a log left by a crash has no map, and
readers never need one: the location index points straight at records).

Log ids come from one counter shared by the writer's rotations and the compactor
(:meth:`EntryLogger.allocate_log_id`). A log the writer created is "unindexed" until the
checkpoint that wrote its last records has also written their locations
(:meth:`EntryLogger.mark_indexed`); the garbage collector never looks at such a log. Deleted
logs (:meth:`EntryLogger.retire_log`) keep their cached read fd open for a grace period, so a
read that looked up an old location just before compaction moved it still reads the bytes.

With ``cache_keep`` set (``entry_log_remove_pages_from_cache``), each flush drops the pages of
the current log that are fsynced and more than ``cache_keep`` bytes behind its end from the page
cache: the next checkpoint's writes then reuse those pages instead of growing the cache with
pages never touched before, which cost 4-8 times as much kernel time per byte written here (a
VM that gives free memory back to its host: 1.2-2.4 vs 0.3 ms of system CPU per MiB). Reads of
what was dropped go to the disk (off by default for that).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from crc32c import crc32c

from bookie import entry_log_format as elf
from bookie.entry_log_format import Location, LogHeader
from bookie.errors import BookieIOError, FormatError
from bookie.file_io import drop_cached, write_all_at
from quire.buffer_pool import BufferPool

LAST_ID_FILE = "lastId"
_WRITE_CHUNK = 4 * 1024 * 1024
# The largest pread of a run read (a record is at most a 5 MiB entry plus its header).
_MAX_RUN_READ = 8 * 1024 * 1024
# run reads of at least this many bytes go into pooled buffers (their entries are views of
# it until the reply is written): a fresh one of ~2 MiB page-faults ~500 times
_POOLED_READ = 256 * 1024
_RUN_BUFFERS = BufferPool(8)
# What flushed entry log stays in the page cache with entry_log_remove_pages_from_cache: the
# entries a reader just past the write cache asks for (a checkpoint writes half of the 64 MB
# write cache at a time).
CACHE_KEEP = 64 * 1024 * 1024
# How long a deleted log's cached read fd stays open (reads in flight finish on it).
RETIRED_FD_GRACE_S = 5.0


def list_log_ids(current_dir: Path) -> list[int]:
    ids = []
    for name in os.listdir(current_dir):
        lid = elf.parse_file_name(name)
        if lid is not None:
            ids.append(lid)
    return sorted(ids)


class EntryLogger:
    def __init__(self, current_dir: Path, log_size_limit: int, cache_keep: int | None = None) -> None:
        self.current_dir = current_dir
        self.log_size_limit = log_size_limit
        # None: leave the page cache alone; else the bytes behind the end that stay cached
        self.cache_keep = cache_keep
        self._dropped_to = 0  # pages of the current log below this offset were dropped
        self.log_id = 0
        self._fd = -1
        self._position = 0
        self._ledger_bytes: dict[int, int] = {}
        self._read_fds: dict[int, int] = {}
        self._read_lock = threading.Lock()
        self._dirty = False
        self._id_lock = threading.Lock()
        self._last_id = 0
        # Logs created by the writer whose locations are not all in the index yet.
        self._unindexed: set[int] = set()
        self._retired_fds: list[tuple[float, int]] = []

    # --- lifecycle -------------------------------------------------------------------------

    def open(self) -> None:
        self.current_dir.mkdir(parents=True, exist_ok=True)
        last = 0
        try:
            last = int((self.current_dir / LAST_ID_FILE).read_text().strip() or "0", 16)
        except (FileNotFoundError, ValueError):
            pass
        ids = list_log_ids(self.current_dir)
        self._last_id = max([last, *ids])
        self._create_log(self.allocate_log_id())

    def allocate_log_id(self) -> int:
        """A log id never used in this dir (persisted in ``lastId`` before it is returned)."""
        with self._id_lock:
            self._last_id += 1
            log_id = self._last_id
            tmp = self.current_dir / (LAST_ID_FILE + ".tmp")
            tmp.write_text(f"{log_id:x}\n")
            os.replace(tmp, self.current_dir / LAST_ID_FILE)
            return log_id

    def unindexed_ids(self) -> set[int]:
        """Writer logs (the current one included) whose locations may not all be indexed."""
        with self._id_lock:
            return set(self._unindexed)

    def busy_ids(self) -> set[int]:
        """Logs GC and compaction must leave alone: the unindexed ones and the current one."""
        with self._id_lock:
            return self._unindexed | {self.log_id}

    def mark_indexed(self) -> None:
        """The checkpoint indexed everything written so far: only the current log stays busy."""
        with self._id_lock:
            self._unindexed = {self.log_id}

    def _create_log(self, log_id: int) -> None:
        with self._id_lock:
            self._unindexed.add(log_id)  # before the file exists: GC lists files, then asks
        path = self.current_dir / elf.file_name(log_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, elf.encode_header(LogHeader(log_id)))
        os.fsync(fd)
        self.log_id, self._fd, self._position = log_id, fd, elf.HEADER_SIZE
        self._ledger_bytes = {}
        self._dropped_to = 0

    def _finish_log(self) -> None:
        """Append the ledgers map, patch the header, fsync and close the current log."""
        if self._fd < 0:
            return
        map_offset = self._position
        data = elf.encode_ledgers_map(self._ledger_bytes)
        os.pwrite(self._fd, data, map_offset)
        os.fsync(self._fd)
        header = elf.encode_header(LogHeader(self.log_id, map_offset, len(self._ledger_bytes)))
        os.pwrite(self._fd, header, 0)
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    def close(self) -> None:
        """Close the current log, writing its ledgers map (graceful shutdown)."""
        if self._fd >= 0:
            self._finish_log()
        with self._read_lock:
            for fd in self._read_fds.values():
                os.close(fd)
            self._read_fds.clear()
            for _, fd in self._retired_fds:
                os.close(fd)
            self._retired_fds.clear()

    # --- writes (checkpoint thread) --------------------------------------------------------

    def add_entries(self, entries: list[tuple[int, int, bytes]]) -> list[bytes]:
        """Append (ledger, entry, data) records in order; returns their encoded locations
        (:func:`~bookie.entry_log_format.decode_location`), not yet durable until flush()."""
        locations: list[bytes] = []
        buf: list[bytes] = []
        pos = self._position
        buf_len = 0
        limit = self.log_size_limit
        log_id = self.log_id
        ledger_bytes = self._ledger_bytes
        # One tight loop per checkpoint: locals only, no per-record helper calls or objects.
        pack_ids, pack_head, pack_loc = elf.IDS.pack, elf.RECORD_HEADER.pack, elf.LOCATION.pack
        for ledger_id, entry_id, data in entries:
            n = len(data) + elf.RECORD_HEADER_SIZE
            if pos + n > limit and pos > elf.HEADER_SIZE:
                self._position = pos
                self._write(buf, pos - buf_len)
                buf, buf_len = [], 0
                ledger_bytes = self._rotate()
                pos = self._position
                log_id = self.log_id
            buf.append(pack_head(n - 8, crc32c(data, crc32c(pack_ids(ledger_id, entry_id))), ledger_id, entry_id))
            buf.append(data)
            locations.append(pack_loc(log_id, pos, n))
            pos += n
            buf_len += n
            ledger_bytes[ledger_id] = ledger_bytes.get(ledger_id, 0) + n
            if buf_len >= _WRITE_CHUNK:
                self._write(buf, pos - buf_len)
                buf, buf_len = [], 0
        self._position = pos
        self._write(buf, pos - buf_len)
        return locations

    def _rotate(self) -> dict[int, int]:
        """Finish the current log and start the next; returns the new log's ledger sizes."""
        self._finish_log()
        self._create_log(self.allocate_log_id())
        return self._ledger_bytes

    def _write(self, buf: list[bytes], offset: int) -> None:
        if not buf:
            return
        write_all_at(self._fd, buf, offset)
        self._dirty = True

    def write_position(self) -> tuple[int, int]:
        """(current log id, append offset): what :meth:`truncate_to` rolls back to."""
        return self.log_id, self._position

    def truncate_to(self, position: tuple[int, int]) -> None:
        """Drop what a failed checkpoint appended to the current log since ``position``, giving
        the space back (e.g. after ENOSPC); nothing of it was indexed. Earlier logs it rotated
        out stay (their entries are unindexed garbage for GC)."""
        log_id, offset = position
        if log_id != self.log_id or self._fd < 0:
            offset = elf.HEADER_SIZE
        os.ftruncate(self._fd, offset)
        self._position = offset

    def flush(self) -> None:
        """fsync the current log (rotated logs were fsynced when they were finished)."""
        if self._dirty and self._fd >= 0:
            os.fdatasync(self._fd)
            if self.cache_keep is not None:  # fsynced: what is cache_keep behind the end may go
                self._dropped_to = drop_cached(self._fd, self._dropped_to, self._position - self.cache_keep)
        self._dirty = False

    # --- reads (any thread) ----------------------------------------------------------------

    def _read_fd(self, log_id: int) -> int:
        fd = self._read_fds.get(log_id)
        if fd is None:
            with self._read_lock:
                fd = self._read_fds.get(log_id)
                if fd is None:
                    try:
                        fd = os.open(self.current_dir / elf.file_name(log_id), os.O_RDONLY)
                    except OSError as exc:
                        raise BookieIOError(f"entry log {log_id:x} cannot be opened: {exc}") from exc
                    self._read_fds[log_id] = fd
        return fd

    def install_read_fd(self, log_id: int, path: Path) -> None:
        """Open ``path`` as log ``log_id`` for reads (a compacted log before its final rename)."""
        fd = os.open(path, os.O_RDONLY)
        with self._read_lock:
            old = self._read_fds.pop(log_id, None)
            self._read_fds[log_id] = fd
            if old is not None:
                self._retired_fds.append((time.monotonic(), old))

    def retire_log(self, log_id: int) -> None:
        """Delete a rotated log: its cached read fd is closed only after a grace period."""
        if log_id == self.log_id:
            raise BookieIOError(f"entry log {log_id:x} is the current log")
        with self._read_lock:
            fd = self._read_fds.pop(log_id, None)
            if fd is not None:
                self._retired_fds.append((time.monotonic(), fd))
        try:
            os.unlink(self.current_dir / elf.file_name(log_id))
        except FileNotFoundError:
            pass
        self.close_retired_fds()

    def close_retired_fds(self, grace_s: float = RETIRED_FD_GRACE_S) -> None:
        now = time.monotonic()
        with self._read_lock:
            keep = []
            for t, fd in self._retired_fds:
                if now - t >= grace_s:
                    os.close(fd)
                else:
                    keep.append((t, fd))
            self._retired_fds = keep

    def read(self, loc: Location, ledger_id: int, entry_id: int) -> bytes:
        """The entry at ``loc``; BookieIOError if the bytes are missing, torn or not that entry."""
        try:
            buf = os.pread(self._read_fd(loc.log_id), loc.length, loc.offset)
            lid, eid, data, _ = elf.decode_record(buf)
        except (OSError, FormatError) as exc:
            raise BookieIOError(f"entry {ledger_id}:{entry_id} unreadable at {loc}: {exc}") from exc
        if (lid, eid) != (ledger_id, entry_id):
            raise BookieIOError(f"entry log {loc} holds {lid}:{eid}, index says {ledger_id}:{entry_id}")
        return data

    def read_run(self, loc: Location, ledger_id: int, entry_id: int, max_entries: int,
                 max_bytes: int) -> list[bytes | memoryview]:
        """Entry ``entry_id`` at ``loc`` and the ones after it in its log that continue the
        same ledger in entry order (a checkpoint writes a ledger's entries sorted): one
        sequential pread per ~``max_bytes``, not an index lookup per entry. The first record
        must be intact (BookieIOError otherwise) and is returned whatever its size; the run
        ends at the first record that is not the next entry (or is torn), at ``max_entries``,
        or before the data would pass ``max_bytes``. Every record's checksum is verified; the
        entries after the first are views into the read buffer, not copies (the caller sends
        them or copies their payloads once)."""
        first = self.read(loc, ledger_id, entry_id)
        out: list[bytes | memoryview] = [first]
        size = len(first)
        offset = loc.offset + loc.length
        # guess the run's length from the first record; a short guess costs another pread
        want = min(max(loc.length * (max_entries - 1), 4096), max_bytes + 64 * 1024)
        expected = entry_id + 1
        # elf.verify_record, inlined: this loop runs once per entry a catch-up read sends
        unpack, rh, append = elf.RECORD_HEADER.unpack_from, elf.RECORD_HEADER_SIZE, out.append
        while len(out) < max_entries and size < max_bytes:
            try:
                if want >= _POOLED_READ:  # a range read's: into a reused buffer, no page faults
                    buf: bytes | bytearray = _RUN_BUFFERS.get(want)
                    blen = os.preadv(self._read_fd(loc.log_id), (buf,), offset)
                else:
                    buf = os.pread(self._read_fd(loc.log_id), want, offset)
                    blen = len(buf)
            except (OSError, BookieIOError):
                break
            pos = 0
            view = memoryview(buf)[:blen]
            left = max_entries - len(out)
            while left and size < max_bytes:
                if blen - pos < rh:
                    break  # truncated: the next pread starts here
                rsize, crc, lid, eid = unpack(buf, pos)
                end = pos + 8 + rsize
                if rsize < 16 or end > blen or crc32c(view[pos + 8 : end]) != crc:
                    break  # torn, or not whole in this buffer (sizes past MAX_RECORD_SIZE never are)
                n = rsize - 16
                if lid != ledger_id or eid != expected or size + n > max_bytes:
                    return out
                append(view[pos + rh : end])
                size += n
                expected += 1
                left -= 1
                pos = end
            if pos == 0:  # not even one whole record fit, or the log ends or is torn here
                if blen < want or want >= _MAX_RUN_READ:
                    break
                want = min(want * 4, _MAX_RUN_READ)
                continue
            offset += pos
            if blen < want:
                break  # the log ends (for now) inside this buffer
        return out

    def read_ahead(self, loc: Location, ledger_id: int, max_entries: int, max_bytes: int) -> list[tuple[int, bytes]]:
        """Entries of ``ledger_id`` that follow ``loc`` in its log (read-ahead); best effort."""
        if max_entries <= 0 or max_bytes <= 0:
            return []
        try:
            buf = os.pread(self._read_fd(loc.log_id), max_bytes, loc.offset + loc.length)
        except (OSError, BookieIOError):
            return []
        out: list[tuple[int, bytes]] = []
        pos = 0
        while len(out) < max_entries:
            try:
                lid, eid, data, length = elf.decode_record(buf, pos)
            except FormatError:
                break
            if lid != ledger_id:
                break
            out.append((eid, data))
            pos += length
        return out
