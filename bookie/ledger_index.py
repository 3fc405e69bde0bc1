"""RocksDB indexes of one ledger dir (rocksdict): entry locations and per-ledger state.

* ``current/locations``: key ``u64 ledger | u64 entry`` (big-endian, so keys sort by ledger
  then entry), value = an encoded :class:`~bookie.entry_log_format.Location`. The last entry of
  a ledger is a floor seek on ``(ledger, max)``.
* ``current/ledgers``: key ``u64 ledger``, value msgpack ``{exists, fenced, master_key,
  explicit_lac, lac, deleted}``; loaded whole into memory at open (BookKeeper's
  LedgerMetadataIndex) and written back, synced, at each checkpoint.

Blocking calls: use from worker threads (the ledger storage does).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import msgpack
from rocksdict import AccessType, Options, Rdict, WriteBatch, WriteOptions

from bookie.entry_log_format import Location, decode_location, encode_location

_LOC_KEY = struct.Struct(">QQ")
_LEDGER_KEY = struct.Struct(">Q")
_LOG_ID = struct.Struct(">Q")  # the first field of an encoded location
_MAX_ENTRY = (1 << 63) - 1
# LedgerState.top before the ledger's highest entry is looked up: above every entry id, so
# "entry id > top" (a new entry, nothing to compare with) is never true while it is unknown.
TOP_UNKNOWN = (1 << 63) - 1


@dataclass(slots=True)
class LedgerState:
    exists: bool = True
    fenced: bool = False
    master_key: bytes = b""
    explicit_lac: bytes = b""  # the client's explicit-LAC body, returned by READ_LAC
    lac: int = -1  # highest LAC seen (entries' piggybacked LAC or explicit)
    deleted: bool = False  # known deleted: adds are refused, never recreate it
    # Not persisted: the highest entry id stored (cache, index or replay) once known in this
    # process (TOP_UNKNOWN until then); adds above it are new and need no overwrite check.
    top: int = TOP_UNKNOWN

    def encode(self) -> bytes:
        return msgpack.packb(
            [self.exists, self.fenced, self.master_key, self.explicit_lac, self.lac, self.deleted], use_bin_type=True
        )

    @classmethod
    def decode(cls, data: bytes) -> "LedgerState":
        return cls(*msgpack.unpackb(data, raw=False))


def _open(path: Path, read_only: bool = False) -> Rdict:
    opts = Options(raw_mode=True)
    if read_only:  # needs no disk space (a start on a full disk); writes fail
        return Rdict(str(path), opts, access_type=AccessType.read_only())
    opts.create_if_missing(True)
    return Rdict(str(path), opts)


def _sync_options() -> WriteOptions:
    wo = WriteOptions()
    wo.sync = True
    return wo


class EntryLocationIndex:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self._db = _open(path, read_only)
        self._sync = _sync_options()

    def get(self, ledger_id: int, entry_id: int) -> Location | None:
        value = self._db.get(_LOC_KEY.pack(ledger_id, entry_id))
        return None if value is None else decode_location(value)

    def put_batch(self, items: list[tuple[int, int, Location]]) -> None:
        """Write many locations in one synced batch."""
        self.put_encoded([(l, e, None) for l, e, _ in items], [encode_location(loc) for _, _, loc in items])

    def put_encoded(self, entries: Sequence[tuple[int, int, object]], locations: Sequence[bytes]) -> None:
        """Write the already-encoded locations of ``entries`` ((ledger, entry, ...) tuples, as
        the checkpoint has them) in one synced batch."""
        wb = WriteBatch(raw_mode=True)
        put, key = wb.put, _LOC_KEY.pack
        for (ledger_id, entry_id, _), value in zip(entries, locations):
            put(key(ledger_id, entry_id), value)
        self._db.write(wb, self._sync)

    def last_entry(self, ledger_id: int) -> int:
        """Highest indexed entry of the ledger, -1 if none."""
        it = self._db.iter()
        it.seek_for_prev(_LOC_KEY.pack(ledger_id, _MAX_ENTRY))
        if not it.valid():
            return -1
        lid, eid = _LOC_KEY.unpack(it.key())
        return eid if lid == ledger_id else -1

    def entries(self, ledger_id: int) -> Iterator[tuple[int, Location]]:
        it = self._db.iter()
        it.seek(_LOC_KEY.pack(ledger_id, 0))
        while it.valid():
            lid, eid = _LOC_KEY.unpack(it.key())
            if lid != ledger_id:
                break
            yield eid, decode_location(it.value())
            it.next()

    def bytes_by_log(self) -> dict[int, int]:
        """Bytes of the records the index points at, per entry log (a full scan: tools, tests)."""
        out: dict[int, int] = {}
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            loc = decode_location(it.value())
            out[loc.log_id] = out.get(loc.log_id, 0) + loc.length
            it.next()
        return out

    def logs_referenced(self, log_ids: set[int], ignore_ledgers: set[int]) -> set[int]:
        """Which of ``log_ids`` an entry location of a ledger not in ``ignore_ledgers`` points
        into: a full scan, stopping early once every one of them is seen (GC of corrupt logs)."""
        wanted, seen = set(log_ids), set()
        it = self._db.iter()
        it.seek_to_first()
        unpack_key, unpack_log = _LOC_KEY.unpack, _LOG_ID.unpack_from
        while it.valid() and wanted:
            (log_id,) = unpack_log(it.value())
            if log_id in wanted and unpack_key(it.key())[0] not in ignore_ledgers:
                wanted.discard(log_id)
                seen.add(log_id)
            it.next()
        return seen

    def delete_ledger(self, ledger_id: int) -> None:
        self._db.delete_range(_LOC_KEY.pack(ledger_id, 0), _LOC_KEY.pack(ledger_id + 1, 0))

    def close(self) -> None:
        self._db.close()


class LedgerMetadataIndex:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self._db = _open(path, read_only)
        self._sync = _sync_options()

    def load_all(self) -> dict[int, LedgerState]:
        out: dict[int, LedgerState] = {}
        it = self._db.iter()
        it.seek_to_first()
        while it.valid():
            (lid,) = _LEDGER_KEY.unpack(it.key())
            out[lid] = LedgerState.decode(it.value())
            it.next()
        return out

    def put_batch(self, states: dict[int, LedgerState]) -> None:
        if not states:
            return
        wb = WriteBatch(raw_mode=True)
        for lid, st in states.items():
            wb.put(_LEDGER_KEY.pack(lid), st.encode())
        self._db.write(wb, self._sync)

    def close(self) -> None:
        self._db.close()
