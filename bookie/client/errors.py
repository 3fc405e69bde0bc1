"""The ledger client's exception hierarchy (``BKError`` and its subclasses).

Names follow BookKeeper's ``BKException`` codes so an operator recognises them. Callers
(the managed ledger) catch :class:`BKError` for "the ledger operation failed" and the
specific subclasses for the cases they handle differently (fenced, closed, no such ledger).
"""

from __future__ import annotations


class BKError(Exception):
    """Base of every ledger-client error."""


class BKLedgerFencedError(BKError):
    """Another client recovered (fenced) the ledger: this handle may not write any more."""


class BKLedgerClosedError(BKError):
    """The ledger (or this handle) is closed: no more adds."""


class BKNoSuchLedgerError(BKError):
    """The ledger's metadata node does not exist."""


class BKNoSuchEntryError(BKError):
    """The entry does not exist (every replica said so, or it is beyond the last confirmed entry)."""


class BKNotEnoughBookiesError(BKError):
    """Fewer writable bookies are available than the ensemble (or a replacement) needs."""


class BKDigestMismatchError(BKError):
    """An entry read back failed its CRC32C check or carries the wrong ledger/entry id."""


class BKTimeoutError(BKError):
    """A bookie did not answer within the request timeout."""


class BKMetadataVersionError(BKError):
    """A compare-and-set on the ledger metadata lost against another writer."""


class BKUnauthorizedAccessError(BKError):
    """The password does not match the ledger's."""


class BKReadError(BKError):
    """A read failed on every replica for a reason other than "no such entry"."""


class BKLedgerRecoveryError(BKError):
    """Recovery could not decide where the ledger ends (unknown replies); nothing was closed.

    The ledger stays IN_RECOVERY and a later ``open_ledger(recovery=True)`` retries.
    """


class BKAddError(BKError):
    """An add could not be replicated (e.g. the ensemble change failed)."""


class BKIllegalOpError(BKError):
    """The operation is not allowed on this handle (e.g. add on a read-only handle)."""


class BKClientClosedError(BKError):
    """The BookKeeper client was closed."""
