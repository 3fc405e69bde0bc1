"""What the broker needs of a managed ledger: ``ManagedLedger`` and ``ManagedCursor`` as Protocols.

The broker programs against these; the real classes (``managed_ledger.ledger``/``cursor``) and
the broker tests' in-memory stand-in (``tests/broker/memory_ml.py``) both satisfy them, which
``tests/test_type_seams.py`` checks with the type checker. Positions and entries are the only
coordinates crossing this seam: never ledger handles, bookies or sockets.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.errors import ManagedLedgerError
from managed_ledger.position import Entry, Position


class ManagedCursorView(Protocol):
    """A subscription's (durable) or a reader's (non-durable) place in a managed ledger."""

    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete_position(self) -> Position: ...

    @property
    def read_position(self) -> Position: ...

    @property
    def number_of_entries_in_backlog(self) -> int: ...

    @property
    def batch_deleted_indexes(self) -> dict[Position, list[int]]: ...

    @property
    def properties(self) -> Mapping[str, int]:
        """The properties of the last mark-delete (deduplication keeps its snapshot there)."""

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` from the read position (may be empty)."""

    def read_ahead(self, max_entries: int) -> None:
        """Start reading the next ``max_entries`` in the background for the next read
        (only while they come from the bookies)."""

    async def read_entries_or_wait(self, max_entries: int) -> list[Entry]:
        """Like ``read_entries`` but waits until at least one entry exists."""

    async def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Cumulative ack up to ``position``."""

    async def delete(self, positions: Iterable[Position],
                     ack_sets: Mapping[Position, Sequence[int]] | None = None) -> None:
        """Individual acks (with batch-index ack sets: set bit = still unacked)."""

    async def skip_entries(self, n: int) -> None: ...

    async def clear_backlog(self) -> None: ...

    async def seek(self, position: Position) -> None:
        """Move the read position only."""

    async def reset_cursor(self, position: Position) -> None:
        """Next entry delivered is ``position`` (clamped); acks above it are forgotten."""

    async def find_newest_matching(self, predicate: Callable[[Entry], bool],
                                   all_entries: bool = False) -> Position | None: ...

    async def close(self) -> None: ...


class ManagedLedgerView(Protocol):
    """One topic partition as an ordered sequence of entries, with cursors."""

    @property
    def name(self) -> str: ...

    @property
    def last_confirmed_entry(self) -> Position: ...

    @property
    def number_of_entries(self) -> int: ...

    @property
    def total_size(self) -> int: ...

    @property
    def cursors(self) -> Mapping[str, ManagedCursorView]:
        """The durable cursors, by name."""

    async def add_entry(self, data: bytes) -> Position:
        """Append; positions follow the order in which the calls began."""

    def async_add_entry(self, data: bytes, callback: Callable[[Position | None, ManagedLedgerError | None], None]) -> None:
        """``add_entry`` without a task: ``callback(position, None)`` or ``(None, error)``;
        raises ManagedLedgerError at once if not writable."""

    async def open_cursor(self, name: str, initial_position: str = "latest") -> ManagedCursorView: ...

    def open_non_durable_cursor(self, start: Position | None = None, inclusive: bool = True) -> ManagedCursorView: ...

    async def delete_cursor(self, name: str) -> None: ...

    def has_position(self, position: Position) -> bool: ...

    def next_valid_position(self, position: Position) -> Position: ...

    async def read_entry(self, position: Position) -> Entry: ...

    async def read_range(self, ledger_id: int, first: int, last: int) -> list[Entry]: ...

    async def terminate(self) -> Position: ...

    async def close(self) -> None: ...

    @property
    def closing(self) -> bool:
        """A close has started or ended: the owner must reopen, not use it."""

    def internal_stats(self) -> dict[str, Any]: ...

    def set_config(self, **changes: Any) -> None: ...


class ManagedLedgerFactoryView(Protocol):
    """Opens managed ledgers by name (``managed_ledger.factory.ManagedLedgerFactory``)."""

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedgerView: ...

    async def delete(self, name: str) -> None: ...

    async def list_names(self, prefix: str = "") -> list[str]: ...
