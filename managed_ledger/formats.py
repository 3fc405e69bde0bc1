"""Persistent formats of the managed ledger (msgpack; pure: bytes in, objects out).

* ``ManagedLedgerInfo`` — the value of ``/managed-ledgers/<name>``: the ledger list
  (id, entries, size, close timestamp, first-entry timestamp), the terminated position,
  properties.
* ``CursorInfo`` — the value of ``/managed-ledgers/<name>/<cursor>``: the cursor ledger id
  (-1 = the position lives in this node) and, as fallback or for small states, the
  mark-delete position, individually deleted ranges, batch-index ack sets, properties.
* ``PositionInfo`` — one record appended to a cursor ledger per flush.

Ranges are stored flat ``[ledger, first, last, ...]`` (closed, per ledger); batch ack sets
as ``[[ledger, entry, [words...]], ...]``. Every record has a format version ``v``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgpack

from managed_ledger.errors import ManagedLedgerError

FORMAT_VERSION = 1


class FormatError(ManagedLedgerError, ValueError):
    """Stored bytes that do not decode as the expected record."""


@dataclass
class LedgerInfo:
    ledger_id: int
    entries: int = 0
    size: int = 0
    # when the ledger was closed/recovered (Pulsar's LedgerInfo.timestamp): what retention
    # time and the TTL-by-closure check use; 0 for the current ledger
    timestamp_ms: int = 0
    first_entry_ms: int = 0  # when its first entry was added (0 = none yet / unknown)

    def to_list(self) -> list[int]:
        return [self.ledger_id, self.entries, self.size, self.timestamp_ms, self.first_entry_ms]

    @classmethod
    def from_list(cls, v: list[int]) -> "LedgerInfo":
        return cls(int(v[0]), int(v[1]), int(v[2]), int(v[3]), int(v[4]) if len(v) > 4 else 0)


@dataclass
class ManagedLedgerInfo:
    ledgers: list[LedgerInfo] = field(default_factory=list)
    terminated_position: tuple[int, int] | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class PositionInfo:
    mark_delete: tuple[int, int]
    individually_deleted: list[int] = field(default_factory=list)  # flat ranges
    batch_deleted: list[list] = field(default_factory=list)  # [[ledger, entry, words], ...]
    properties: dict[str, int] = field(default_factory=dict)


@dataclass
class CursorInfo:
    cursors_ledger_id: int = -1
    position: PositionInfo | None = None
    last_active_ms: int = 0
    cursor_properties: dict[str, str] = field(default_factory=dict)


def _unpack(data: bytes, kind: str) -> dict:
    """Decode and check the version and record kind (``k``)."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise FormatError(f"undecodable {kind}: {e}") from e
    if not isinstance(obj, dict) or obj.get("v") != FORMAT_VERSION or obj.get("k") != kind:
        raise FormatError(f"not a {kind} record of version {FORMAT_VERSION}")
    return obj


def encode_ml_info(info: ManagedLedgerInfo) -> bytes:
    return msgpack.packb(
        {
            "v": FORMAT_VERSION,
            "k": "ManagedLedgerInfo",
            "ledgers": [li.to_list() for li in info.ledgers],
            "terminated": list(info.terminated_position) if info.terminated_position else None,
            "props": info.properties,
        }
    )


def decode_ml_info(data: bytes) -> ManagedLedgerInfo:
    if not data:
        return ManagedLedgerInfo()  # a node created empty by a parent-making put
    obj = _unpack(data, "ManagedLedgerInfo")
    term = obj.get("terminated")
    return ManagedLedgerInfo(
        ledgers=[LedgerInfo.from_list(v) for v in obj.get("ledgers", [])],
        terminated_position=(int(term[0]), int(term[1])) if term else None,
        properties=dict(obj.get("props") or {}),
    )


def _position_to_obj(p: PositionInfo) -> dict:
    return {
        "md": list(p.mark_delete),
        "ranges": p.individually_deleted,
        "batch": p.batch_deleted,
        "props": p.properties,
    }


def _position_from_obj(obj: dict) -> PositionInfo:
    md = obj["md"]
    return PositionInfo(
        mark_delete=(int(md[0]), int(md[1])),
        individually_deleted=[int(x) for x in obj.get("ranges") or []],
        batch_deleted=[[int(b[0]), int(b[1]), [int(w) for w in b[2]]] for b in obj.get("batch") or []],
        properties={str(k): int(v) for k, v in (obj.get("props") or {}).items()},
    )


def encode_position_info(p: PositionInfo) -> bytes:
    obj = _position_to_obj(p)
    obj["v"] = FORMAT_VERSION
    obj["k"] = "PositionInfo"
    return msgpack.packb(obj)


def decode_position_info(data: bytes) -> PositionInfo:
    obj = _unpack(data, "PositionInfo")
    try:
        return _position_from_obj(obj)
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise FormatError(f"bad PositionInfo: {e}") from e


def encode_cursor_info(c: CursorInfo) -> bytes:
    return msgpack.packb(
        {
            "v": FORMAT_VERSION,
            "k": "CursorInfo",
            "cl": c.cursors_ledger_id,
            "pos": _position_to_obj(c.position) if c.position else None,
            "active": c.last_active_ms,
            "cprops": c.cursor_properties,
        }
    )


def decode_cursor_info(data: bytes) -> CursorInfo:
    obj = _unpack(data, "CursorInfo")
    try:
        pos = obj.get("pos")
        return CursorInfo(
            cursors_ledger_id=int(obj.get("cl", -1)),
            position=_position_from_obj(pos) if pos else None,
            last_active_ms=int(obj.get("active", 0)),
            cursor_properties={str(k): str(v) for k, v in (obj.get("cprops") or {}).items()},
        )
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise FormatError(f"bad CursorInfo: {e}") from e
