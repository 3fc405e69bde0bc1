"""What the managed ledger needs of a ledger client: the seam to ``bookie.client``, as Protocols.

The real ``bookie.client.BookKeeper`` / ``LedgerHandle`` and the test fake
(``tests/managed_ledger/fake_bk.py``) both satisfy these; ``tests/test_type_seams.py`` runs the
type checker so a fake that drifts from the real client fails CI. The managed ledger never sees
bookies, ensembles or sockets: only ledgers, entry ids and bytes.
"""

from __future__ import annotations

import logging
from typing import Callable, Protocol, Sequence

from bookie.client.errors import BKError


class LedgerEntryView(Protocol):
    """One entry read back (``bookie.client.LedgerEntry``)."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def entry_id(self) -> int: ...

    @property
    def data(self) -> bytes: ...


class LedgerHandleView(Protocol):
    """A writable or read-only handle on one ledger (``bookie.client.LedgerHandle``)."""

    @property
    def ledger_id(self) -> int: ...

    @property
    def last_add_confirmed(self) -> int: ...

    @property
    def length(self) -> int: ...

    @property
    def is_closed(self) -> bool: ...

    async def add_entry(self, data: bytes) -> int:
        """Append; ids follow call order; returns once the ack quorum acked in order."""

    def async_add_entry(self, data: bytes, callback: Callable[[int, BKError | None], None]) -> None:
        """``add_entry`` without a task: ``callback(entry_id, None)`` or ``(-1, error)``;
        raises BKError at once if the handle cannot write."""

    async def read(self, first: int, last: int) -> Sequence[LedgerEntryView]:
        """Entries ``first..last`` (inclusive), at most up to the last add confirmed."""

    async def read_unconfirmed(self, first: int, last: int) -> Sequence[LedgerEntryView]:
        """Entries ``first..last`` without the LAC bound (a dead writer's confirmed tail)."""

    async def read_payloads(self, first: int, last: int, unconfirmed: bool = False) -> list[bytes]:
        """The data of entries ``first..last`` as ``read`` (``unconfirmed``: as
        ``read_unconfirmed``) returns them, without an entry object each."""

    async def close(self) -> None:
        """Close the ledger (writer) or release the handle (reader)."""


class LedgerClient(Protocol):
    """Create, open (with fencing recovery) and delete ledgers (``bookie.client.BookKeeper``)."""

    async def create_ledger(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                            password: bytes = b"", custom_metadata: dict[str, bytes] | None = None
                            ) -> LedgerHandleView:
        """A new OPEN ledger on a fresh ensemble."""

    async def open_ledger(self, ledger_id: int, password: bytes = b"", recovery: bool = True) -> LedgerHandleView:
        """A read handle; with ``recovery`` the ledger is fenced and closed first."""

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the ledger's metadata (the bookies' GC frees the data)."""


async def close_quietly(lh: LedgerHandleView, log: logging.Logger, what: str) -> None:
    """Close a handle whose close failing changes nothing for the caller (a reader, a ledger
    being deleted or left behind); the failure is logged at debug level, never swallowed silently."""
    try:
        await lh.close()
    except BKError as e:
        log.debug("%s: closing ledger %d: %s", what, lh.ledger_id, e)
