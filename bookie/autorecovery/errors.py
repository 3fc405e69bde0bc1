"""The auto-recovery exception hierarchy (``AutoRecoveryError`` and its subclasses)."""

from __future__ import annotations

__all__ = ["AutoRecoveryError", "ReplicationError", "NoLedgerPasswordError", "DecommissionError"]


class AutoRecoveryError(Exception):
    """Base of every auto-recovery failure."""


class ReplicationError(AutoRecoveryError):
    """A fragment could not be copied (no replica answered, the target refused): retried later."""


class NoLedgerPasswordError(AutoRecoveryError):
    """None of ``autorecovery_ledger_passwords`` opens the ledger: its entries cannot be written."""


class DecommissionError(AutoRecoveryError):
    """``quire bookie-shell decommission`` refused (the bookie is still writable, ...)."""
