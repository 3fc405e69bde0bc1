"""Positions and offset ranges: pure helpers shared by planning (driver) and reading (executors).

A position is ``(ledger_id, entry_id, batch_index)``; ``batch_index`` -1 means "the whole entry".
Ranges are ``[start, end)``; a message ``(l, e, b)`` (``b`` -1 when not batched) is inside when
``start <= (l, e, max(b, 0)) < end``, so entry-level ends cut between entries and a message id
taken from ``__messageId`` selects inside a batch. Offsets are written ``"L:E"`` / ``"L:E:B"``.
"""

from __future__ import annotations

import base64
from typing import Any, NamedTuple


class Pos(NamedTuple):
    ledger_id: int
    entry_id: int
    batch_index: int = -1

    def __str__(self) -> str:
        if self.batch_index < 0:
            return f"{self.ledger_id}:{self.entry_id}"
        return f"{self.ledger_id}:{self.entry_id}:{self.batch_index}"

    @classmethod
    def parse(cls, text: str) -> "Pos":
        parts = [int(p) for p in str(text).split(":")]
        if len(parts) not in (2, 3):
            raise ValueError(f"bad position {text!r}: want 'ledger:entry[:batch]'")
        return cls(*parts)


EARLIEST = Pos(-1, -1)
# Above any real position (Pulsar's latest message id uses Long.MAX_VALUE too).
LATEST = Pos(2**63 - 1, 2**63 - 1)


def message_key(ledger_id: int, entry_id: int, batch_index: int) -> Pos:
    return Pos(ledger_id, entry_id, max(batch_index, 0))


def after(last: Pos) -> Pos:
    """The exclusive end that includes the entry ``last`` (the next entry may be in a later ledger:
    tuple order still puts every later position at or after ``(L, E+1)``)."""
    if last.entry_id < 0:
        return Pos(last.ledger_id, 0)
    return Pos(last.ledger_id, last.entry_id + 1)


def position_from_json(value: Any) -> Pos:
    """One topic-partition's value in a startingOffsets/endingOffsets JSON map.

    Accepted: ``"L:E[:B]"``, ``{"ledgerId": L, "entryId": E, "batchIndex": B}``, a list of bytes of
    ``MessageId.serialize()`` (StreamNative's form), base64 of the same, ``-2`` earliest, ``-1`` latest.
    """
    if value in (-2, "earliest"):
        return EARLIEST
    if value in (-1, "latest"):
        return LATEST
    if isinstance(value, dict):
        return Pos(int(value["ledgerId"]), int(value["entryId"]), int(value.get("batchIndex", -1)))
    if isinstance(value, list):
        return _from_serialized(bytes(value))
    if isinstance(value, str):
        if ":" in value:
            return Pos.parse(value)
        return _from_serialized(base64.b64decode(value))
    raise ValueError(f"cannot read a message id from {value!r}")


def _from_serialized(data: bytes) -> Pos:
    from clients.message_id import MessageId

    mid = MessageId.deserialize(data)
    return Pos(mid.ledger_id(), mid.entry_id(), mid.batch_index())
