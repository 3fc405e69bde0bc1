"""Journal file format (pure): file header, records, meta records and a tolerant scanner.

A journal file ``<hex id>.txn`` starts with a 512-byte header::

    b"QJNL" | u32 version | u64 file_id | zeros to 512

followed by records::

    u32 length | u32 crc32c(length bytes + payload) | payload

``payload`` starts with ``u64 ledger_id | i64 entry_id``. A data record's payload is the entry
exactly as the client sent it (see :mod:`bookie.entry_format`); meta records use BookKeeper's
negative entry ids: master key (-0x1000), fence (-0x2000) and explicit LAC (-0x8000), each
followed by its body. The tail of a file is preallocated with zeros, so scanning stops cleanly
at a zero length, a short record (torn write) or a checksum mismatch (corruption): everything
before that point is returned, nothing after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from crc32c import crc32c

from bookie.errors import FormatError

MAGIC = b"QJNL"
VERSION = 1
HEADER_SIZE = 512

ENTRY_ID_MASTER_KEY = -0x1000
ENTRY_ID_FENCE = -0x2000
ENTRY_ID_EXPLICIT_LAC = -0x8000
# A record that only forces a group commit (Journal.flush); replay skips it like any unknown id.
ENTRY_ID_NOOP = -0x4000

# A record can hold the largest frame body plus its ids; anything bigger is corruption.
MAX_RECORD_SIZE = 16 * 1024 * 1024

_HEADER = struct.Struct(">4sIQ")
_LEN = struct.Struct(">I")
_REC = struct.Struct(">II")
_IDS = struct.Struct(">Qq")
_IDS_LAC = struct.Struct(">Qqq")  # explicit LAC record: ids + the LAC
_LAC = struct.Struct(">q")

# crc32c of a record's 4-byte length field, by length: the record CRC chains from it, and adds
# of one topic mostly share a few sizes, so this saves a pack + a crc call per record. Bounded
# (cleared when full) since sizes are client-chosen.
_LEN_CRC: dict[int, int] = {}
_LEN_CRC_MAX = 4096


def file_name(file_id: int) -> str:
    return f"{file_id:x}.txn"


def parse_file_name(name: str) -> int | None:
    """The journal id of a file name, or None for anything that is not a journal."""
    if not name.endswith(".txn"):
        return None
    try:
        return int(name[:-4], 16)
    except ValueError:
        return None


def encode_header(file_id: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, file_id).ljust(HEADER_SIZE, b"\0")


def decode_header(data: bytes | memoryview) -> int:
    """The file id stored in a header; FormatError on a bad magic or version."""
    if len(data) < HEADER_SIZE:
        raise FormatError("journal header truncated")
    magic, version, file_id = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise FormatError(f"not a journal file (magic {magic!r})")
    if version != VERSION:
        raise FormatError(f"unsupported journal version {version}")
    return file_id


def _len_crc(n: int) -> int:
    if len(_LEN_CRC) >= _LEN_CRC_MAX:
        _LEN_CRC.clear()
    crc = _LEN_CRC[n] = crc32c(_LEN.pack(n))
    return crc


def record_prefix(payload: bytes | bytearray | memoryview) -> bytes:
    """The 8 bytes written before a record's payload: length and crc32c over length + payload
    (the journal's per-add hot path: the writer queues prefix and payload without a join)."""
    n = len(payload)
    seed = _LEN_CRC.get(n)
    if seed is None:
        seed = _len_crc(n)
    return _REC.pack(n, crc32c(payload, seed))


def encode_record(payload: bytes | bytearray | memoryview) -> bytes:
    """One framed record: length, checksum (covering the length too), payload."""
    return record_prefix(payload) + payload


def master_key_payload(ledger_id: int, master_key: bytes) -> bytes:
    return _IDS.pack(ledger_id, ENTRY_ID_MASTER_KEY) + master_key


def fence_payload(ledger_id: int) -> bytes:
    return _IDS.pack(ledger_id, ENTRY_ID_FENCE)


def explicit_lac_payload(ledger_id: int, lac: int, body: bytes) -> bytes:
    return _IDS_LAC.pack(ledger_id, ENTRY_ID_EXPLICIT_LAC, lac) + body


# A record for ledger 0 with an unused negative id: replay skips it; it only forces a group.
NOOP_PAYLOAD = _IDS.pack(0, ENTRY_ID_NOOP)


@dataclass(frozen=True, slots=True)
class Record:
    """One scanned record: its ids, its payload and where it ends in the file."""

    ledger_id: int
    entry_id: int
    payload: bytes
    end_offset: int

    @property
    def is_meta(self) -> bool:
        return self.entry_id < 0

    @property
    def body(self) -> bytes:
        """The bytes after the ids (master key, LAC + body); the whole payload for data."""
        return self.payload[16:] if self.entry_id < 0 else self.payload

    def explicit_lac(self) -> tuple[int, bytes]:
        (lac,) = _LAC.unpack_from(self.payload, _IDS.size)
        return lac, self.payload[24:]


@dataclass(slots=True)
class ScanResult:
    """Where scanning stopped and why ('eof', 'zeros', 'torn', 'corrupt')."""

    end_offset: int
    reason: str


def scan(data: bytes | memoryview, start: int, result: ScanResult | None = None) -> Iterator[Record]:
    """Yield the valid records of a journal file image from ``start``; stop at the first bad one.

    ``result`` (if given) receives the offset just after the last good record and the reason
    scanning stopped, so replay knows exactly where valid data ends.
    """
    view = memoryview(data)
    n = len(view)
    pos = start
    reason = "eof"
    while True:
        if pos + 8 > n:
            reason = "eof" if pos == n else "torn"
            break
        length, crc = _REC.unpack_from(view, pos)
        if length == 0:
            reason = "zeros"
            break
        if length < 16 or length > MAX_RECORD_SIZE:
            reason = "corrupt"
            break
        end = pos + 8 + length
        if end > n:
            reason = "torn"
            break
        payload = view[pos + 8 : end]
        if crc32c(payload, crc32c(view[pos : pos + 4])) != crc:
            reason = "corrupt"
            break
        ledger_id, entry_id = _IDS.unpack_from(payload, 0)
        pos = end
        yield Record(ledger_id, entry_id, bytes(payload), end)
    if result is not None:
        result.end_offset = pos
        result.reason = reason
