"""Entry-log compaction: move the live entries of a mostly dead log into a new log.

Transactional, like BookKeeper's TransactionalEntryLogCompactor; each step is durable before
the next one starts, so a crash anywhere loses nothing and leaves no orphan:

1. copy: every record of old log ``O`` whose ledger is alive and whose location index entry
   still points at that very record goes into ``<N>.log.compacting`` (``N`` a fresh log id),
   followed by its ledgers map; fsync.
2. rename it to ``<N>.log.<O>.compacted``; fsync the dir. From here the copy is complete.
3. index (under the storage's flush lock, one synced batch): each copied entry whose location
   still points into ``O`` now points into ``N``. Its read fd is opened first, so reads of
   the moved entries work before the final rename.
4. delete ``O`` (its cached read fd is closed after a grace period).
5. rename ``<N>.log.<O>.compacted`` to ``<N>.log``.

:func:`recover` runs when the storage opens: a ``.compacting`` file is an unfinished copy and
is deleted (``O`` is untouched); a ``.compacted`` file is finished from step 3 on (the index
update is idempotent: it only moves entries still pointing into ``O``).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bookie import entry_log_format as elf
from bookie.entry_log_format import LogHeader
from bookie.entry_log_metadata import EntryLogMetadata, ScanResult, iter_records
from bookie.errors import BookieIOError, FormatError
from bookie.file_io import write_all_at
from bookie.ledger_index import EntryLocationIndex
from bookie.log_mark import fsync_dir

log = logging.getLogger(__name__)

COMPACTING_SUFFIX = ".compacting"
_COMPACTED = re.compile(r"^([0-9a-f]+)\.log\.([0-9a-f]+)\.compacted$")
_WRITE_CHUNK = 4 * 1024 * 1024

# Test hook: QUIRE_TEST_COMPACTION_KILL="<point>:<n>" SIGKILLs this process the n-th time
# compaction reaches <point> (copy, copied, renamed, indexed, old_deleted, done).
_KILL_AT = os.environ.get("QUIRE_TEST_COMPACTION_KILL", "")
_kill_counts: dict[str, int] = {}


def _crash_point(name: str) -> None:
    if not _KILL_AT:
        return
    point, _, n = _KILL_AT.partition(":")
    if point != name:
        return
    _kill_counts[name] = _kill_counts.get(name, 0) + 1
    if _kill_counts[name] >= int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def compacting_name(log_id: int) -> str:
    return f"{log_id:x}.log{COMPACTING_SUFFIX}"


def compacted_name(new_id: int, old_id: int) -> str:
    return f"{new_id:x}.log.{old_id:x}.compacted"


class Throttle:
    """Blocking rate limiter (entries or bytes per second) for the copy loop; <= 0 = none.
    Its waits end early once ``stop`` is set (the bookie is shutting down)."""

    def __init__(self, rate: float, stop: threading.Event | None = None) -> None:
        self.rate = rate
        self.stop = stop or threading.Event()
        self._start = time.monotonic()
        self._done = 0.0

    def acquire(self, amount: float) -> None:
        if self.rate <= 0:
            return
        self._done += amount
        ahead = self._done / self.rate - (time.monotonic() - self._start)
        if ahead > 0:
            self.stop.wait(ahead)


@dataclass
class CompactionCopy:
    """The result of step 1-2: where the copy is and which entries it holds."""

    old_id: int
    new_id: int
    path: Path  # the .compacted file
    moved: list[tuple[int, int, bytes]] = field(default_factory=list)  # (ledger, entry, new location)
    ledger_bytes: dict[int, int] = field(default_factory=dict)
    bytes_copied: int = 0

    def metadata(self) -> EntryLogMetadata:
        return EntryLogMetadata(self.new_id, dict(self.ledger_bytes), sum(self.ledger_bytes.values()))


class CompactionAborted(Exception):
    """The copy ran past its time budget (or was told to stop); the old log is untouched."""


def copy_live_entries(
    current_dir: Path,
    old: EntryLogMetadata,
    new_id: int,
    locations: EntryLocationIndex,
    is_live: Callable[[int], bool],
    throttle: Throttle,
    by_bytes: bool,
    deadline: float | None,
) -> CompactionCopy | None:
    """Steps 1-2 (blocking). None if nothing in ``old`` is live any more (delete it directly).
    BookieIOError if the old log turns out corrupt; CompactionAborted past ``deadline``."""
    src = current_dir / elf.file_name(old.log_id)
    tmp = current_dir / compacting_name(new_id)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    copy = CompactionCopy(old.log_id, new_id, current_dir / compacted_name(new_id, old.log_id))
    try:
        pos = elf.HEADER_SIZE
        buf: list[bytes | memoryview] = []
        buf_len = 0
        scan = ScanResult()
        pack_loc = elf.LOCATION.pack
        for rec in iter_records(src, scan, raw=True):
            lid = rec.ledger_id
            if lid == elf.LEDGERS_MAP_ID or not is_live(lid):
                continue
            loc = locations.get(lid, rec.entry_id)
            if loc is None or loc.log_id != old.log_id or loc.offset != rec.offset:
                continue  # superseded, or its ledger's index is gone
            buf.append(rec.data)  # the verified record as it is
            copy.moved.append((lid, rec.entry_id, pack_loc(new_id, pos, rec.length)))
            copy.ledger_bytes[lid] = copy.ledger_bytes.get(lid, 0) + rec.length
            pos += rec.length
            buf_len += rec.length
            throttle.acquire(rec.length if by_bytes else 1)
            if throttle.stop.is_set():
                raise CompactionAborted(f"compaction of log {old.log_id:x} stopped: shutting down")
            if buf_len >= _WRITE_CHUNK:
                write_all_at(fd, buf, pos - buf_len)
                buf, buf_len = [], 0
                _crash_point("copy")
                if deadline is not None and time.monotonic() > deadline:
                    raise CompactionAborted(f"compaction of log {old.log_id:x} ran out of time")
        if scan.corrupt:
            raise BookieIOError(f"entry log {old.log_id:x} is corrupt: {scan.corrupt}")
        if not copy.moved:
            os.close(fd)
            fd = -1
            os.unlink(tmp)
            return None
        write_all_at(fd, buf, pos - buf_len)
        copy.bytes_copied = pos - elf.HEADER_SIZE
        map_data = elf.encode_ledgers_map(copy.ledger_bytes)
        os.pwrite(fd, map_data, pos)
        os.pwrite(fd, elf.encode_header(LogHeader(new_id, pos, len(copy.ledger_bytes))), 0)
        os.fsync(fd)
        _crash_point("copied")
        os.close(fd)
        fd = -1
        os.rename(tmp, copy.path)
        fsync_dir(current_dir)
        _crash_point("renamed")
        return copy
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if tmp.exists():
            tmp.unlink()
        raise


def update_index(locations: EntryLocationIndex, old_id: int, moved: list[tuple[int, int, bytes]]) -> int:
    """Step 3 (blocking): move entries still pointing into ``old_id``; returns how many moved."""
    keep: list[tuple[int, int, None]] = []
    values: list[bytes] = []
    for lid, eid, new_loc in moved:
        loc = locations.get(lid, eid)
        if loc is not None and loc.log_id == old_id:
            keep.append((lid, eid, None))
            values.append(new_loc)
    if keep:
        locations.put_encoded(keep, values)  # one synced batch
    _crash_point("indexed")
    return len(keep)


def finish(current_dir: Path, copy: CompactionCopy, delete_old: Callable[[int], None]) -> None:
    """Steps 4-5 (blocking): delete the old log, then give the copy its final name."""
    delete_old(copy.old_id)
    fsync_dir(current_dir)
    _crash_point("old_deleted")
    os.rename(copy.path, current_dir / elf.file_name(copy.new_id))
    fsync_dir(current_dir)
    _crash_point("done")


def unfinished(current_dir: Path) -> list[str]:
    """Compaction files a crash left behind in ``current_dir`` (what ``recover`` would act on)."""
    return sorted(n for n in os.listdir(current_dir)
                  if n.endswith(".log" + COMPACTING_SUFFIX) or _COMPACTED.match(n))


def recover(current_dir: Path, locations: EntryLocationIndex) -> list[str]:
    """Finish or undo compactions a crash interrupted (blocking; before the dir serves reads).
    Returns what was done, one line per file."""
    done: list[str] = []
    for name in sorted(os.listdir(current_dir)):
        path = current_dir / name
        if name.endswith(".log" + COMPACTING_SUFFIX):
            path.unlink()
            done.append(f"removed unfinished compaction copy {name}")
            continue
        m = _COMPACTED.match(name)
        if m is None:
            continue
        new_id, old_id = int(m.group(1), 16), int(m.group(2), 16)
        scan = ScanResult()
        moved = []
        try:
            for rec in iter_records(path, scan):
                if rec.ledger_id != elf.LEDGERS_MAP_ID:
                    moved.append((rec.ledger_id, rec.entry_id, elf.LOCATION.pack(new_id, rec.offset, rec.length)))
        except (OSError, FormatError) as exc:
            scan.corrupt = str(exc)
        if scan.corrupt:
            # An fsynced copy that does not read back: keep both files for an operator.
            log.error("compacted log %s is unreadable (%s); left in place with log %x", name, scan.corrupt, old_id)
            done.append(f"left unreadable {name}")
            continue
        n = update_index(locations, old_id, moved)
        try:
            (current_dir / elf.file_name(old_id)).unlink()
        except FileNotFoundError:
            pass
        fsync_dir(current_dir)
        os.rename(path, current_dir / elf.file_name(new_id))
        fsync_dir(current_dir)
        done.append(f"finished compaction {name}: {n} locations moved, log {old_id:x} deleted")
    for line in done:
        log.info("%s", line)
    return done
