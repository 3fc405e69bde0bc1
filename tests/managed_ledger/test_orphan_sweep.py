"""Orphan-ledger sweep against a real bookie and ZooKeeper: an unreferenced ledger tagged
with an open managed ledger is deleted once old enough; everything referenced, young or
foreign stays."""

from __future__ import annotations

import dataclasses
import time

from bookie.client.ledger_metadata import decode_metadata, encode_metadata
from managed_ledger.orphan_sweep import sweep_orphan_ledgers
from metadata.ledger_ids import ledger_path
from tests.managed_ledger.cluster import NAME, owner


async def _age(store, ledger_id: int, seconds: float) -> None:
    raw, stat = await store.get(ledger_path(ledger_id))
    md = decode_metadata(raw)
    md = dataclasses.replace(md, ctime_ms=md.ctime_ms - int(seconds * 1000))
    await store.put(ledger_path(ledger_id), encode_metadata(md), expected_version=stat.version)


async def test_orphan_sweep_deletes_only_unreferenced_old_tagged_ledgers(bookie, zk_url, ml_config) -> None:
    async with owner(zk_url, ml_config.replace(max_entries_per_ledger=5, orphan_ledger_sweep_interval_s=0)) as f:
        ml = await f.open(NAME)
        cursor = await ml.open_cursor("s", "earliest")
        everything = await ml.open_cursor("all", "earliest")
        for i in range(12):
            await ml.add_entry(b"%d" % i)
        await cursor.mark_delete(cursor.read_position)  # a cursor ledger exists now
        listed = [li.ledger_id for li in ml.ledgers]
        tag = {"application": b"pulsar", "component": b"managed-ledger", "pulsar/managed-ledger": NAME.encode()}
        # a ledger whose deletion "failed": created by this managed ledger, in no list
        orphan = await f.bk.create_ledger(1, 1, 1, custom_metadata=tag)
        await orphan.close()
        young = await f.bk.create_ledger(1, 1, 1, custom_metadata=tag)
        await young.close()
        foreign = await f.bk.create_ledger(
            1, 1, 1, custom_metadata={"pulsar/managed-ledger": b"some/other/persistent/topic"}
        )
        await foreign.close()
        untagged = await f.bk.create_ledger(1, 1, 1)
        await untagged.close()
        cursor_tag = {"pulsar/cursor": cursor.path.encode()}
        cursor_orphan = await f.bk.create_ledger(1, 1, 1, custom_metadata=cursor_tag)
        await cursor_orphan.close()
        cursor_current = cursor.store.ledger_id
        listed.append(cursor_current)
        for lid in [orphan.ledger_id, cursor_orphan.ledger_id, foreign.ledger_id, untagged.ledger_id, *listed]:
            await _age(f.store, lid, 7200)
        t0 = time.monotonic()
        deleted = await sweep_orphan_ledgers(f, min_age_s=3600)
        assert deleted == sorted([orphan.ledger_id, cursor_orphan.ledger_id]), deleted
        assert await f.store.exists(ledger_path(orphan.ledger_id)) is None
        for lid in [young.ledger_id, foreign.ledger_id, untagged.ledger_id, *listed]:
            assert await f.store.exists(ledger_path(lid)) is not None
        # the managed ledger and its cursor still read everything
        got = []
        while batch := await everything.read_entries(10):
            got.extend(e.data for e in batch)
        assert got == [b"%d" % i for i in range(12)]
        assert await sweep_orphan_ledgers(f, min_age_s=3600) == []
        assert time.monotonic() - t0 < 60
