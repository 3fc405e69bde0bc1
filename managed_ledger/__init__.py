"""managed_ledger: a topic partition as an ordered sequence of ledgers, with cursors.

Public API (see docs/contracts.md): :class:`Position`, :class:`Entry`,
:class:`ManagedLedgerFactory`, :class:`ManagedLedger`, :class:`ManagedCursor`,
:class:`ManagedLedgerConfig` and the errors in :mod:`managed_ledger.errors`.
"""

from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.errors import (
    CursorNotFoundError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from managed_ledger.position import Entry, Position

__all__ = [
    "CursorNotFoundError",
    "Entry",
    "ManagedLedgerClosedError",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerFencedError",
    "ManagedLedgerTerminatedError",
    "Position",
    "ManagedLedger",
    "ManagedCursor",
    "ManagedLedgerFactory",
]


def __getattr__(name: str) -> object:
    # The trio-heavy classes load lazily so pure users (codecs, stats tools) stay light.
    if name == "ManagedLedger":
        from managed_ledger.ledger import ManagedLedger

        return ManagedLedger
    if name == "ManagedCursor":
        from managed_ledger.cursor import ManagedCursor

        return ManagedCursor
    if name == "ManagedLedgerFactory":
        from managed_ledger.factory import ManagedLedgerFactory

        return ManagedLedgerFactory
    raise AttributeError(name)
