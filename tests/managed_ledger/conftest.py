"""Fixtures for managed-ledger tests: fake metadata store + fake ledger client (unit tests),
and from cluster.py the real-process ones (``bookie``, ``ml_config``, ``driver``)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import pytest

from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from tests.managed_ledger.cluster import bookie, driver, ml_config  # noqa: F401 (fixtures)
from tests.managed_ledger.fake_bk import FakeBookies
from tests.managed_ledger.fake_store import FakeMetadataServer


@pytest.fixture
def meta() -> FakeMetadataServer:
    return FakeMetadataServer()


@pytest.fixture
def bookies() -> FakeBookies:
    return FakeBookies()


@pytest.fixture
def config() -> ManagedLedgerConfig:
    return ManagedLedgerConfig(ensemble_size=1, write_quorum=1, ack_quorum=1, retention_check_interval_seconds=3600)


@pytest.fixture
async def factory(meta: FakeMetadataServer, bookies: FakeBookies, config: ManagedLedgerConfig) -> AsyncIterator[ManagedLedgerFactory]:
    async with ManagedLedgerFactory(meta.client(), bookies.client(), config) as f:
        yield f


class Crash:
    """Simulates a SIGKILL of the owner: remembers the durable state (metadata nodes and
    bookie contents) at `kill()` and puts it back after the factory has been torn down,
    undoing whatever its orderly close wrote."""

    def __init__(self, meta: FakeMetadataServer, bookies: FakeBookies) -> None:
        self.meta, self.bookies = meta, bookies
        self._saved: tuple | None = None

    def kill(self) -> None:
        self._saved = copy.deepcopy((self.meta.nodes, self.bookies.ledgers, self.bookies.next_id))

    def restore(self) -> None:
        assert self._saved is not None
        nodes, ledgers, next_id = copy.deepcopy(self._saved)
        self.meta.nodes = nodes
        self.bookies.ledgers = ledgers
        self.bookies.next_id = max(next_id, self.bookies.next_id)


@pytest.fixture
def crash(meta: FakeMetadataServer, bookies: FakeBookies) -> Crash:
    return Crash(meta, bookies)
