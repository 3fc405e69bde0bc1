"""managed_ledger package."""
