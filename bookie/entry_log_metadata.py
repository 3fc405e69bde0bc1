"""Entry-log metadata: which ledgers a rotated entry log holds and how many bytes of each.

:class:`EntryLogMetadata` is built from a log's ledgers map, or by scanning its records when
the map is missing, zeroed or corrupt (a log left by a crash has none). A scan that meets a
bad record before the end of the file marks the metadata ``corrupt``: such a log is never
deleted or compacted (what follows the bad record is unknown), only reported. A torn record
at the very end, or a zero-filled tail, is the normal end of a crashed log.

:class:`EntryLogMetadataMap` keeps the metadata of every rotated log of one ledger dir in
RocksDB (``current/entrylog_meta``) so a restart does not rescan every log. The value is
BookKeeper's ``EntryLogMetadata.serialize`` layout: ``short 0, long logId, long totalSize,
long remainingSize, long n, (long ledgerId, long size) * n``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from rocksdict import Options, Rdict, WriteOptions

from bookie import entry_log_format as elf
from bookie.errors import FormatError

_HEAD = struct.Struct(">hqqqq")
_PAIR = struct.Struct(">qq")
_KEY = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_SCAN_CHUNK = 8 * 1024 * 1024


@dataclass
class EntryLogMetadata:
    log_id: int
    ledgers: dict[int, int] = field(default_factory=dict)  # ledger -> bytes (records) in this log
    total_size: int = 0
    corrupt: str = ""  # why the scan stopped early ("" = intact)

    @property
    def remaining_size(self) -> int:
        return sum(self.ledgers.values())

    @property
    def usage(self) -> float:
        return self.remaining_size / self.total_size if self.total_size else 0.0

    def remove_ledgers(self, dead: set[int]) -> int:
        """Forget the dead ledgers; returns how many were removed."""
        gone = [lid for lid in self.ledgers if lid in dead]
        for lid in gone:
            del self.ledgers[lid]
        return len(gone)

    def encode(self) -> bytes:
        items = sorted(self.ledgers.items())
        head = _HEAD.pack(0, self.log_id, self.total_size, self.remaining_size, len(items))
        return head + b"".join(_PAIR.pack(l, b) for l, b in items)

    @classmethod
    def decode(cls, data: bytes) -> "EntryLogMetadata":
        if len(data) < _HEAD.size:
            raise FormatError("entry log metadata truncated")
        version, log_id, total, _remaining, n = _HEAD.unpack_from(data, 0)
        if version != 0 or n < 0 or len(data) != _HEAD.size + n * _PAIR.size:
            raise FormatError("invalid entry log metadata")
        ledgers = dict(_PAIR.unpack_from(data, _HEAD.size + i * _PAIR.size) for i in range(n))
        return cls(log_id, ledgers, total)


@dataclass(slots=True)
class RecordInfo:
    ledger_id: int
    entry_id: int
    offset: int
    length: int
    data: bytes | memoryview  # the entry's bytes, or the whole record with raw=True


class ScanResult:
    """Filled in by :func:`iter_records` once the iteration ends."""

    def __init__(self) -> None:
        self.corrupt = ""
        self.end = 0


def _all_zero(fd: int, start: int, end: int) -> bool:
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos)
        if not chunk or chunk.count(0) != len(chunk):
            return not chunk
        pos += len(chunk)
    return True


def iter_records(path: Path, result: ScanResult | None = None, raw: bool = False) -> Iterator[RecordInfo]:
    """Every record of an entry log file (entries and ledgers-map records), read in chunks.
    With ``raw`` each record's ``data`` is the whole record (header included, checksum
    verified) as a view into the read buffer: no copy, for compaction.

    Stops at the first bad record; ``result.corrupt`` says why when that record is not the
    torn or zero-filled tail of the file. FormatError if the header itself is bad.
    """
    res = result if result is not None else ScanResult()
    fd = os.open(path, os.O_RDONLY)
    try:
        file_size = os.fstat(fd).st_size
        elf.decode_header(os.pread(fd, elf.HEADER_SIZE, 0))
        pos = buf_start = elf.HEADER_SIZE
        buf = b""
        while True:
            rel = pos - buf_start
            avail = len(buf) - rel
            need = elf.RECORD_HEADER_SIZE
            if avail >= 4:
                (size,) = _U32.unpack_from(buf, rel)
                if 16 <= size <= elf.MAX_RECORD_SIZE:
                    need = 8 + size
            if avail < need:
                if buf_start + len(buf) >= file_size:
                    break  # a torn record at the end of the file: the normal end of a crashed log
                buf = buf[rel:] + os.pread(fd, max(_SCAN_CHUNK, need), buf_start + len(buf))
                buf_start = pos
                continue
            try:
                if raw:
                    lid, eid, length = elf.verify_record(buf, rel)
                    data: bytes | memoryview = memoryview(buf)[rel : rel + length]
                else:
                    lid, eid, data, length = elf.decode_record(buf, rel)
            except FormatError as exc:
                if not _all_zero(fd, pos, file_size):
                    res.corrupt = f"{exc} (offset {pos})"
                break
            yield RecordInfo(lid, eid, pos, length, data)
            pos += length
        res.end = pos
    finally:
        os.close(fd)


def scan_metadata(path: Path, log_id: int) -> EntryLogMetadata:
    """Metadata by reading every record of the log."""
    res = ScanResult()
    meta = EntryLogMetadata(log_id)
    ledgers = meta.ledgers
    for rec in iter_records(path, res):
        if rec.ledger_id == elf.LEDGERS_MAP_ID:
            continue
        ledgers[rec.ledger_id] = ledgers.get(rec.ledger_id, 0) + rec.length
    meta.total_size = sum(ledgers.values())
    meta.corrupt = res.corrupt
    return meta


def read_metadata(path: Path, log_id: int) -> tuple[EntryLogMetadata, bool]:
    """(metadata, from_map): from the ledgers map when it is present and intact, else by scan.
    FormatError/OSError if the file is not an entry log at all."""
    with open(path, "rb") as f:
        header = elf.decode_header(f.read(elf.HEADER_SIZE))
        if header.log_id != log_id:
            raise FormatError(f"entry log {path.name} says it is log {header.log_id:x}")
        size = os.fstat(f.fileno()).st_size
        if header.ledgers_map_offset >= elf.HEADER_SIZE and header.ledgers_count > 0 and header.ledgers_map_offset < size:
            f.seek(header.ledgers_map_offset)
            try:
                ledgers = elf.decode_ledgers_map(f.read(size - header.ledgers_map_offset), 0, header.ledgers_count)
            except FormatError:
                pass  # a broken map is never trusted: scan instead
            else:
                if len(ledgers) == header.ledgers_count:
                    return EntryLogMetadata(log_id, ledgers, sum(ledgers.values())), True
    return scan_metadata(path, log_id), False


class EntryLogMetadataMap:
    """Persisted metadata of the rotated logs of one dir (blocking: use from a worker thread)."""

    def __init__(self, path: Path) -> None:
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self._db = Rdict(str(path), opts)
        self._sync = WriteOptions()
        self._sync.sync = True

    def load_all(self) -> dict[int, EntryLogMetadata]:
        out: dict[int, EntryLogMetadata] = {}
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            (log_id,) = _KEY.unpack(it.key())
            try:
                out[log_id] = EntryLogMetadata.decode(it.value())
            except FormatError:
                pass  # rescanned from the log itself
            it.next()
        return out

    def put(self, meta: EntryLogMetadata) -> None:
        self._db.put(_KEY.pack(meta.log_id), meta.encode(), self._sync)

    def delete(self, log_id: int) -> None:
        self._db.delete(_KEY.pack(log_id), self._sync)

    def close(self) -> None:
        self._db.close()
