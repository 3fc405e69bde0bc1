"""Fixtures for managed-ledger unit tests: fake metadata store + fake ledger client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
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
