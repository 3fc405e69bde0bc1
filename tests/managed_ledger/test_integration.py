"""The managed ledger against real bookie processes and a real ZooKeeper."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import metadata
from bookie.client.bookkeeper import BookKeeper
from bookie.client.config import ClientConfig
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory, Position
from tests.managed_ledger.cluster import start_bookie

NAME = "t/ns/persistent/it"


@pytest.fixture
def bookie(quire_procs, zk_url: str, tmp_path: Path):
    return start_bookie(quire_procs, zk_url, tmp_path)


@pytest.fixture
def ml_config() -> ManagedLedgerConfig:
    return ManagedLedgerConfig(
        ensemble_size=1, write_quorum=1, ack_quorum=1,
        metadata_ensemble_size=1, metadata_write_quorum=1, metadata_ack_quorum=1,
        retention_check_interval_seconds=3600,
    )


class Owner:
    """One 'broker': its own metadata session, ledger client and factory."""

    def __init__(self, zk_url: str, config: ManagedLedgerConfig) -> None:
        self.zk_url, self.config = zk_url, config

    async def __aenter__(self) -> ManagedLedgerFactory:
        self.store = await metadata.open_store(self.zk_url)
        self.bk = BookKeeper(self.store, ClientConfig())
        await self.bk.__aenter__()
        with trio.fail_after(20):  # the bookie's port opens before it registers itself
            while not await self.bk.writable_bookies():
                await trio.sleep(0.05)
        self.factory = ManagedLedgerFactory(self.store, self.bk, self.config)
        return await self.factory.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.factory.__aexit__(*exc)
        finally:
            await self.bk.__aexit__(None, None, None)
            await self.store.close()


async def test_add_read_across_rollovers(bookie, zk_url, ml_config) -> None:
    async with Owner(zk_url, ml_config.replace(max_entries_per_ledger=50)) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("s", "earliest")
        results: dict[int, Position] = {}

        async def add(i: int) -> None:
            results[i] = await ml.add_entry(b"%05d" % i)

        async with trio.open_nursery() as n:
            for i in range(230):
                n.start_soon(add, i)
                if i % 20 == 0:
                    await trio.sleep(0)
        assert len(ml.ledgers) >= 5
        order = [i for i, _ in sorted(results.items(), key=lambda kv: kv[1])]
        f.cache_manager.max_bytes = 0  # force reads to the bookies
        ml.cache.clear()
        got = []
        while batch := await c.read_entries(64):
            got.extend(batch)
        assert [e.data for e in got] == [b"%05d" % i for i in order]
        assert c.number_of_entries_in_backlog == 230
