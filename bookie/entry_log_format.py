"""Entry log file format (pure): header, entry records, ledgers map, location values, scanning.

An entry log ``<hex id>.log`` starts with a 1024-byte header::

    b"QELG" | u32 version | u64 ledgers_map_offset | u32 ledgers_count | u64 log_id | zeros

``ledgers_map_offset``/``ledgers_count`` stay 0 until the log is rotated and its ledgers map
written. Records (entries and the map alike)::

    u32 size | u32 crc32c(ledger..data) | u64 ledger_id | i64 entry_id | data      (size = 16 + len(data))

The ledgers map is one record with ledger id ``LEDGERS_MAP_ID`` whose data is
``(u64 ledger_id, u64 bytes) * n`` in batches of at most 10,000 ledgers per record. An
entry's location is ``(log_id, offset of its record, record length)``: one pread reads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from crc32c import crc32c

from bookie.errors import DigestMismatchError, FormatError

MAGIC = b"QELG"
VERSION = 1
HEADER_SIZE = 1024
RECORD_HEADER_SIZE = 24
LEDGERS_MAP_ID = (1 << 64) - 1
LEDGERS_MAP_BATCH = 10_000

_HEADER = struct.Struct(">4sIQIQ")
_REC = struct.Struct(">IIQq")
_IDS = struct.Struct(">Qq")
_PAIR = struct.Struct(">QQ")
_LOCATION = struct.Struct(">QQI")
# For writers that build many records in a loop (the checkpoint): the record header is
# RECORD_HEADER.pack(16 + len(data), crc32c(data, crc32c(IDS.pack(ledger, entry))), ledger, entry)
# and an encoded location is LOCATION.pack(log_id, offset, record length).
RECORD_HEADER = _REC
IDS = _IDS
LOCATION = _LOCATION
_LOCATION_SIZE = _LOCATION.size
MAX_RECORD_SIZE = 64 * 1024 * 1024


def file_name(log_id: int) -> str:
    return f"{log_id:x}.log"


def parse_file_name(name: str) -> int | None:
    if not name.endswith(".log"):
        return None
    try:
        return int(name[:-4], 16)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class LogHeader:
    log_id: int
    ledgers_map_offset: int = 0
    ledgers_count: int = 0


def encode_header(h: LogHeader) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, h.ledgers_map_offset, h.ledgers_count, h.log_id).ljust(HEADER_SIZE, b"\0")


def decode_header(data: bytes | memoryview) -> LogHeader:
    if len(data) < HEADER_SIZE:
        raise FormatError("entry log header truncated")
    magic, version, map_offset, count, log_id = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise FormatError(f"not an entry log (magic {magic!r})")
    if version != VERSION:
        raise FormatError(f"unsupported entry log version {version}")
    return LogHeader(log_id, map_offset, count)


def encode_record_header(ledger_id: int, entry_id: int, data: bytes | memoryview) -> bytes:
    """The 24 bytes that precede ``data`` in its record (size, checksum, ids)."""
    ids = _IDS.pack(ledger_id, entry_id)
    return struct.pack(">II", 16 + len(data), crc32c(data, crc32c(ids))) + ids


def encode_record(ledger_id: int, entry_id: int, data: bytes | memoryview) -> bytes:
    return encode_record_header(ledger_id, entry_id, data) + data


def decode_record(buf: bytes | memoryview, offset: int = 0) -> tuple[int, int, bytes, int]:
    """(ledger_id, entry_id, data, record_length) of the record at ``offset``.

    FormatError if it does not fit in ``buf``; DigestMismatchError if its checksum is wrong.
    """
    if len(buf) - offset < RECORD_HEADER_SIZE:
        raise FormatError("entry log record truncated")
    size, crc, ledger_id, entry_id = _REC.unpack_from(buf, offset)
    if size < 16 or size > MAX_RECORD_SIZE or offset + 8 + size > len(buf):
        raise FormatError(f"bad entry log record size {size} at {offset}")
    view = memoryview(buf)[offset + 8 : offset + 8 + size]
    if crc32c(view) != crc:
        raise DigestMismatchError(f"entry log record at {offset} fails its checksum")
    return ledger_id, entry_id, bytes(view[16:]), 8 + size


def verify_record(buf: bytes | memoryview, offset: int = 0) -> tuple[int, int, int]:
    """(ledger_id, entry_id, record_length) of the intact record at ``offset``, without
    copying its data (errors as :func:`decode_record`)."""
    if len(buf) - offset < RECORD_HEADER_SIZE:
        raise FormatError("entry log record truncated")
    size, crc, ledger_id, entry_id = _REC.unpack_from(buf, offset)
    if size < 16 or size > MAX_RECORD_SIZE or offset + 8 + size > len(buf):
        raise FormatError(f"bad entry log record size {size} at {offset}")
    if crc32c(memoryview(buf)[offset + 8 : offset + 8 + size]) != crc:
        raise DigestMismatchError(f"entry log record at {offset} fails its checksum")
    return ledger_id, entry_id, 8 + size


def encode_ledgers_map(ledger_bytes: dict[int, int]) -> bytes:
    """The ledgers map as one or more records (ledger -> bytes of its entries in this log)."""
    items = sorted(ledger_bytes.items())
    out = []
    for i in range(0, len(items), LEDGERS_MAP_BATCH):
        chunk = items[i : i + LEDGERS_MAP_BATCH]
        out.append(encode_record(LEDGERS_MAP_ID, len(chunk), b"".join(_PAIR.pack(l, b) for l, b in chunk)))
    return b"".join(out)


def decode_ledgers_map(buf: bytes | memoryview, offset: int, count: int) -> dict[int, int]:
    result: dict[int, int] = {}
    while len(result) < count:
        ledger_id, n, data, length = decode_record(buf, offset)
        if ledger_id != LEDGERS_MAP_ID or len(data) != n * _PAIR.size:
            raise FormatError(f"invalid ledgers map record at {offset}")
        for i in range(n):
            l, b = _PAIR.unpack_from(data, i * _PAIR.size)
            result[l] = b
        offset += length
    return result


@dataclass(frozen=True, slots=True)
class Location:
    log_id: int
    offset: int
    length: int


def encode_location(loc: Location) -> bytes:
    return _LOCATION.pack(loc.log_id, loc.offset, loc.length)


def decode_location(data: bytes) -> Location:
    if len(data) != _LOCATION_SIZE:  # a damaged index value: FormatError, not struct.error
        raise FormatError(f"entry location must be {_LOCATION_SIZE} bytes, got {len(data)}")
    return Location(*_LOCATION.unpack(data))


@dataclass(slots=True)
class ScannedRecord:
    ledger_id: int
    entry_id: int
    data: bytes
    offset: int
    length: int


def scan(buf: bytes | memoryview, start: int = HEADER_SIZE) -> Iterator[ScannedRecord]:
    """Every intact record (entries and map records) from ``start``; stops at the first bad one."""
    pos = start
    n = len(buf)
    while pos + RECORD_HEADER_SIZE <= n:
        try:
            ledger_id, entry_id, data, length = decode_record(buf, pos)
        except FormatError:
            return
        yield ScannedRecord(ledger_id, entry_id, data, pos, length)
        pos += length
