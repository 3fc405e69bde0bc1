"""Positions and entries: the only coordinates the broker sees.

A position is (ledger id, entry id); positions order first by ledger, then by entry, which
is also the order in which they were written because ledger ids grow. `Position` and
`Entry` are NamedTuples (frozen, ordered, hashable, with attribute access). Hot paths build
them with ``tuple.__new__(Position, (l, e))``, which skips the Python-level ``__new__``.
"""

from __future__ import annotations

from typing import NamedTuple


class Position(NamedTuple):
    """Immutable and ordered; a tuple underneath so creating and comparing positions on
    the add/ack hot paths costs C-level tuple operations."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    def __repr__(self) -> str:
        return f"Position({self.ledger_id}, {self.entry_id})"

    @classmethod
    def parse(cls, text: str) -> "Position":
        ledger, entry = text.split(":")
        return cls(int(ledger), int(entry))

    def as_tuple(self) -> tuple[int, int]:
        return (self.ledger_id, self.entry_id)


class Entry(NamedTuple):
    """An entry read from the managed ledger; a NamedTuple for the same reason as
    Position (cursor reads create one per entry)."""

    position: Position
    data: bytes

    @property
    def ledger_id(self) -> int:
        return self.position.ledger_id

    @property
    def entry_id(self) -> int:
        return self.position.entry_id


# Before every real position: the mark-delete of a cursor that has acked nothing in a
# managed ledger whose first ledger is L is (L, -1).
EARLIEST = Position(-1, -1)
