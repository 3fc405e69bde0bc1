"""The managed_ledger package's exception hierarchy."""

from __future__ import annotations


class ManagedLedgerError(Exception):
    """Base of every managed-ledger error."""


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another owner took the managed ledger over (metadata version conflict or a fenced
    ledger at the bookies). The caller must close the topic; nothing more is written."""


class ManagedLedgerTerminatedError(ManagedLedgerError):
    """The managed ledger was terminated: it accepts no more adds."""


class ManagedLedgerClosedError(ManagedLedgerError):
    """The managed ledger (or cursor) was closed."""


class ManagedLedgerNotFoundError(ManagedLedgerError):
    """No managed ledger with that name exists (open with create_if_missing=False)."""


class CursorNotFoundError(ManagedLedgerError):
    """No cursor with that name exists."""


class ManagedLedgerWriteError(ManagedLedgerError):
    """An add failed at the ledger client (not fencing); the ledger is rolled over."""


class CursorPersistError(ManagedLedgerError):
    """A cursor position could be persisted neither to its cursor ledger nor to the
    metadata store."""


class InvalidPositionError(ManagedLedgerError, ValueError):
    """A seek/reset/mark-delete to a position the managed ledger does not hold."""


class MetadataUnavailableError(ManagedLedgerError):
    """The metadata store failed (not a version conflict); the operation may be retried."""
