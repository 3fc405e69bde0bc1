"""Fixtures of the ledger client's unit tests (memory store, fake bookies) for auto-recovery."""

from tests.bookie.client.conftest import bk, cluster, store  # noqa: F401
