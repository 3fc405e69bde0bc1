"""Fixtures for the ledger client's unit tests: a memory metadata store, fake bookies, a client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

import metadata
from bookie.client import BookKeeper, ClientConfig
from metadata.store import MetadataStore
from tests.bookie.client.fake_bookie import FakeBookie


def fast_config(**overrides) -> ClientConfig:
    """Short timeouts so fault tests finish quickly (semantics unchanged)."""
    values = dict(
        add_entry_timeout_s=1.0,
        read_timeout_s=1.0,
        first_speculative_read_timeout_ms=200,
        max_speculative_read_timeout_ms=400,
        timeout_monitor_interval_ms=20,
        client_connect_timeout_ms=1000,
    )
    values.update(overrides)
    return ClientConfig(**values)


class FakeCluster:
    """A set of fake bookies registered under /ledgers/available in one store."""

    def __init__(self, nursery: trio.Nursery, store: MetadataStore) -> None:
        self.nursery = nursery
        self.store = store
        self.bookies: dict[str, FakeBookie] = {}

    async def add_bookie(self) -> FakeBookie:
        fb = FakeBookie()
        await fb.start(self.nursery)
        self.bookies[fb.bookie_id] = fb
        await self.store.create(f"/ledgers/available/{fb.bookie_id}", b"", make_parents=True)
        return fb

    async def unregister(self, fb: FakeBookie) -> None:
        await self.store.delete(f"/ledgers/available/{fb.bookie_id}")

    def __getitem__(self, bookie_id: str) -> FakeBookie:
        return self.bookies[bookie_id]

    def in_ensemble(self, ensemble) -> list[FakeBookie]:
        return [self.bookies[b] for b in ensemble]


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await metadata.open_store("memory://")
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def cluster(nursery, store) -> FakeCluster:
    c = FakeCluster(nursery, store)
    for _ in range(3):
        await c.add_bookie()
    return c


@pytest.fixture
async def bk(store, cluster) -> AsyncIterator[BookKeeper]:
    async with BookKeeper(store, fast_config()) as client:
        yield client
