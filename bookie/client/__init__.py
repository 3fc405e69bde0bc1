"""The ledger client (BookKeeper's replication client): create, add, read, close, recover, delete.

Public API (see docs/contracts.md, "bookie.client"): ``BookKeeper``, ``ClientConfig``,
``LedgerHandle``, ``LedgerEntry``, ``LedgerMetadata``, ``LedgerState`` and the ``BK*`` errors.
"""

from bookie.client.bookkeeper import BookKeeper
from bookie.client.config import ClientConfig
from bookie.client.errors import (
    BKClientClosedError,
    BKDigestMismatchError,
    BKError,
    BKIllegalOpError,
    BKLedgerClosedError,
    BKLedgerFencedError,
    BKLedgerRecoveryError,
    BKMetadataVersionError,
    BKNoSuchEntryError,
    BKNoSuchLedgerError,
    BKNotEnoughBookiesError,
    BKReadError,
    BKTimeoutError,
    BKUnauthorizedAccessError,
)
from bookie.client.ledger_handle import LedgerEntry, LedgerHandle
from bookie.client.ledger_metadata import LedgerMetadata, LedgerState

__all__ = [
    "BookKeeper",
    "ClientConfig",
    "LedgerHandle",
    "LedgerEntry",
    "LedgerMetadata",
    "LedgerState",
    "BKError",
    "BKLedgerFencedError",
    "BKLedgerClosedError",
    "BKNoSuchLedgerError",
    "BKNoSuchEntryError",
    "BKNotEnoughBookiesError",
    "BKDigestMismatchError",
    "BKTimeoutError",
    "BKMetadataVersionError",
    "BKUnauthorizedAccessError",
    "BKReadError",
    "BKLedgerRecoveryError",
    "BKIllegalOpError",
    "BKClientClosedError",
]
