"""The entry layout every ledger entry carries end to end (client -> bookie -> client).

    ledger_id u64 | entry_id i64 | lac i64 | length u64 | crc32c u32 | payload      (big-endian)

``length`` is the cumulative ledger length including this entry (BookKeeper's
``LedgerHandle.addToLength``). The CRC32C covers the 32 header bytes before the digest, then
the payload (the digest field itself is skipped). The bookie stores these bytes untouched and
uses only the ids from the header; the ledger client packs and verifies them. Pure module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from bookie.errors import DigestMismatchError, FormatError

__all__ = [
    "EntryHeader", "HEADER_SIZE", "METADATA_SIZE", "pack_entry", "unpack_header", "unpack_ids", "entry_lac", "verify",
]

_META = struct.Struct(">QqqQ")
_HEADER = struct.Struct(">QqqQI")
_LEDGER_ENTRY = struct.Struct(">Qq")
_IDS = struct.Struct(">Qqq")  # the first three header fields: ledger id, entry id, LAC
METADATA_SIZE = _META.size  # 32: the bytes before the digest
HEADER_SIZE = _HEADER.size  # 36: metadata + CRC32C

# (ledger_id, entry_id, lac) of an entry's header, without a copy or a digest check: what the
# bookie reads of every add. A bound method, so the hot path pays no extra Python call; the
# caller checks ``len(data) >= HEADER_SIZE`` first (struct.error otherwise).
unpack_ids = _IDS.unpack_from


@dataclass(frozen=True, slots=True)
class EntryHeader:
    ledger_id: int
    entry_id: int
    lac: int
    length: int
    crc: int

    @property
    def payload_offset(self) -> int:
        return HEADER_SIZE


def pack_entry(ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes | bytearray | memoryview) -> bytes:
    """The full entry bytes with its CRC32C digest."""
    meta = _META.pack(ledger_id, entry_id, lac, length)
    crc = crc32c(payload, crc32c(meta))
    return b"".join((meta, crc.to_bytes(4, "big"), payload))


def unpack_header(data: bytes | bytearray | memoryview) -> EntryHeader:
    """The header fields, without checking the digest (FormatError if too short)."""
    if len(data) < HEADER_SIZE:
        raise FormatError(f"entry of {len(data)} bytes is shorter than its {HEADER_SIZE}-byte header")
    return EntryHeader(*_HEADER.unpack_from(data, 0))


def entry_lac(data: bytes | bytearray | memoryview) -> int:
    """The LAC an entry carries (header bytes 16-24); the caller checks the length first."""
    return _IDS.unpack_from(data)[2]


def verify(data: bytes | bytearray | memoryview) -> EntryHeader:
    """The header after checking the CRC32C over header and payload (DigestMismatchError)."""
    hdr = unpack_header(data)
    view = memoryview(data)
    actual = crc32c(view[HEADER_SIZE:], crc32c(view[:METADATA_SIZE]))
    if actual != hdr.crc:
        raise DigestMismatchError(
            f"entry {hdr.ledger_id}:{hdr.entry_id} digest mismatch (stored {hdr.crc:#010x}, computed {actual:#010x})"
        )
    return hdr


def is_entry(data: bytes | bytearray | memoryview, ledger_id: int, entry_id: int) -> bool:
    """``verify`` for a reader's hot path: True iff ``data`` is entry ``ledger_id:entry_id``
    with a matching CRC32C (no header object, no exception)."""
    if len(data) < HEADER_SIZE:
        return False
    lid, eid, _lac, _length, crc = _HEADER.unpack_from(data, 0)
    if lid != ledger_id or eid != entry_id:
        return False
    view = memoryview(data)
    return crc32c(view[HEADER_SIZE:], crc32c(view[:METADATA_SIZE])) == crc


def has_ids(data: bytes | bytearray | memoryview, ledger_id: int, entry_id: int) -> bool:
    """True iff ``data`` is a whole entry header naming ``ledger_id:entry_id`` (no digest
    check: for bytes whose checksum was verified on the way, e.g. by an in-process bookie)."""
    return len(data) >= HEADER_SIZE and _LEDGER_ENTRY.unpack_from(data, 0) == (ledger_id, entry_id)


def payload(data: bytes | bytearray | memoryview) -> bytes:
    """The payload bytes of an entry (no digest check)."""
    return bytes(memoryview(data)[HEADER_SIZE:])
