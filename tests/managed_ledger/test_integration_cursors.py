"""Cursors against real bookie processes and a real ZooKeeper: throttled positions and the
cursor ledger across a SIGKILL of the owner, the metadata-node fallback when the bookies
fail, message TTL, seek by publish time, readers moved by trims, and the internal stats."""

from __future__ import annotations

import json
import struct

import pytest
import trio

import metadata
from bookie.client.errors import BKNoSuchLedgerError
from managed_ledger import Entry, Position
from managed_ledger.formats import decode_cursor_info, decode_ml_info
from tests.managed_ledger.cluster import NAME, owner

CURSOR_PATH = f"/managed-ledgers/{NAME}/sub"


def published(t_ms: int, payload: bytes = b"") -> bytes:
    """A test entry carrying its publish time (the managed ledger never parses entries)."""
    return struct.pack(">q", t_ms) + payload


def publish_time(e: Entry) -> int:
    return struct.unpack_from(">q", e.data)[0]


async def test_sigkill_loses_only_unpersisted_throttled_acks(driver, zk_url, ml_config) -> None:
    # one persist per 1000 s: after the first, positions stay dirty until flushed
    d = driver(throttle_mark_delete=0.001)
    assert "ready" in await d.reply()
    ps = [Position.parse(p) for p in (await d.call(op="add", n=300))["positions"]]
    assert await d.call(op="mark_delete", position=str(ps[9])) == {"ok": True}  # persisted
    assert await d.call(op="mark_delete", position=str(ps[49])) == {"ok": True}  # dirty
    assert await d.call(op="flush") == {"ok": True}  # persisted
    assert await d.call(op="mark_delete", position=str(ps[149])) == {"ok": True}  # dirty
    assert await d.call(op="delete", positions=[str(ps[200]), str(ps[202])]) == {"ok": True}  # dirty
    live = (await d.call(op="stats"))["cursors"]["sub"]
    assert live["markDeletePosition"] == str(ps[149]) and live["totalNonContiguousDeletedMessagesRange"] == 2
    d.kill()
    async with owner(zk_url, ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)) as f:
        ml = await f.open(NAME)
        c = ml.cursors["sub"]
        # exactly the last persisted state: what it acked is not redelivered, what was
        # only in memory is, and the backlog counts every entry not persisted as acked
        assert c.mark_delete_position == ps[49] and len(c.individually_deleted_ranges) == 0
        assert c.number_of_entries_in_backlog == 250
        got = []
        while batch := await c.read_entries(100):
            got.extend(e.position for e in batch)
        assert got == ps[50:]


async def test_cursor_ledger_rolls_and_survives_sigkill(driver, zk_url, ml_config) -> None:
    d = driver(metadata_max_entries_per_ledger=3)
    assert "ready" in await d.reply()
    ps = [Position.parse(p) for p in (await d.call(op="add", n=20))["positions"]]
    observer = await metadata.open_store(zk_url)
    try:
        ids: list[int] = []
        for p in ps[:10]:  # 10 position records, 3 per cursor ledger
            assert await d.call(op="mark_delete", position=str(p)) == {"ok": True}
            data, _ = await observer.get(CURSOR_PATH)
            ids.append(decode_cursor_info(data).cursors_ledger_id)
    finally:
        await observer.close()
    rolled = list(dict.fromkeys(ids))
    assert len(rolled) == 4 and -1 not in rolled
    d.kill()
    async with owner(zk_url, ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)) as f:
        for old in rolled[:-1]:  # replaced cursor ledgers were deleted
            with pytest.raises(BKNoSuchLedgerError):
                await f.bk.get_ledger_metadata(old)
        ml = await f.open(NAME)
        c = ml.cursors["sub"]
        assert c.mark_delete_position == ps[9]  # the last record of the last cursor ledger
        await c.mark_delete(ps[10])  # the new owner writes a new cursor ledger...
        node = decode_cursor_info((await f.store.get(CURSOR_PATH))[0])
        assert node.cursors_ledger_id not in rolled
        with pytest.raises(BKNoSuchLedgerError):  # ...and drops the recovered one
            await f.bk.get_ledger_metadata(rolled[-1])


async def test_message_ttl_moves_cursors_forward(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(
        max_entries_per_ledger=5, retention_time_minutes=-1, retention_size_mb=-1,
        message_ttl_seconds=60, message_expiry_check_interval_seconds=0.05,
    )
    now = 1_700_000_000_000
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("sub", "earliest")
        ps = [await ml.add_entry(published(now + i)) for i in range(12)]  # ledgers of 5, 5, 2
        assert [li.entries for li in ml.ledgers] == [5, 5, 2]
        await trio.sleep(0.2)
        assert c.mark_delete_position < ps[0]  # closed just now: nothing expired
        ml.ledgers[0].timestamp_ms -= 120_000  # the first ledger was closed 2 min ago
        with trio.fail_after(10):  # the background expiry check moves the cursor
            while c.mark_delete_position != ps[4]:
                await trio.sleep(0.02)
        ml.ledgers[1].timestamp_ms -= 120_000
        await ml.expire_messages()
        assert c.mark_delete_position == ps[9]  # the current ledger never expires by age
        # per message, by publish time (what the broker does with the entry metadata)
        assert await c.expire_entries(lambda e: publish_time(e) < now + 11) == ps[10]
        assert c.mark_delete_position == ps[10] and c.number_of_entries_in_backlog == 1
    async with owner(zk_url, cfg.replace(message_ttl_seconds=0)) as f:
        ml = await f.open(NAME)
        assert ml.cursors["sub"].mark_delete_position == ps[10]  # expiry is persisted


async def test_seek_by_publish_time(bookie, zk_url, ml_config) -> None:
    t0 = 1_700_000_000_000
    cfg = ml_config.replace(max_entries_per_ledger=8, retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("sub", "earliest")
        ps = [await ml.add_entry(published(t0 + i * 1000, b"m%d" % i)) for i in range(30)]
        assert len({p.ledger_id for p in ps}) == 4
        while await c.read_entries(100):
            pass
        await c.mark_delete(ps[29])
        ml.cache.clear()  # the search reads from the bookie

        async def seek_to_time(t: int) -> None:
            newest_before = await c.find_newest_matching(lambda e: publish_time(e) < t, all_entries=True)
            await c.reset_cursor(Position(-1, -1) if newest_before is None else ml.next_valid_position(newest_before))

        await seek_to_time(t0 + 17_500)  # first message published at or after it: #18
        assert c.read_position == ps[18] and c.mark_delete_position == ps[17]
        assert c.number_of_entries_in_backlog == 12
        got = []
        while batch := await c.read_entries(5):
            got.extend(batch)
        assert [e.data[8:] for e in got] == [b"m%d" % i for i in range(18, 30)]
        await seek_to_time(t0 - 1)  # before everything: rewinds to the first entry
        assert c.read_position == ps[0] and c.number_of_entries_in_backlog == 30


async def test_non_durable_cursor_moved_forward_by_trim(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(max_entries_per_ledger=4, retention_time_minutes=0, retention_size_mb=0)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        sub = await ml.open_cursor("sub", "earliest")
        reader = ml.open_non_durable_cursor(Position(-1, -1))
        ps = [await ml.add_entry(b"%d" % i) for i in range(10)]  # ledgers of 4, 4, current 2
        assert [e.position for e in await reader.read_entries(2)] == ps[:2]
        doomed = [li.ledger_id for li in ml.ledgers[:2]]
        await sub.mark_delete(ps[7])  # consumed: the reader does not hold the ledgers
        await ml.trim()
        assert [li.ledger_id for li in ml.ledgers] == [ps[8].ledger_id]
        for lid in doomed:
            with pytest.raises(BKNoSuchLedgerError):
                await f.bk.get_ledger_metadata(lid)
        assert reader.mark_delete_position == ps[7]
        assert [e.data for e in await reader.read_entries(10)] == [b"8", b"9"]
        assert await f.store.children(ml.path) == ["sub"]  # the reader is never persisted


async def test_internal_stats_shape(bookie, zk_url, ml_config) -> None:
    async with owner(zk_url, ml_config.replace(max_entries_per_ledger=3, retention_time_minutes=-1, retention_size_mb=-1)) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("sub", "earliest")
        reader = ml.open_non_durable_cursor(None, name="reader")
        ps = [await ml.add_entry(b"12345") for _ in range(5)]  # ledgers of 3 and (current) 2
        await c.read_entries(4)
        await c.delete([ps[1], ps[3]])
        s = json.loads(json.dumps(ml.internal_stats()))  # JSON-ready
        assert s["entriesAddedCounter"] == 5 and s["numberOfEntries"] == 5 and s["totalSize"] == 25
        assert s["currentLedgerEntries"] == 2 and s["currentLedgerSize"] == 10
        assert s["lastConfirmedEntry"] == str(ps[-1]) and s["state"] == "LedgerOpened"
        assert [(li["ledgerId"], li["entries"], li["size"]) for li in s["ledgers"]] == [
            (ps[0].ledger_id, 3, 15), (ps[3].ledger_id, 2, 10)]
        closed = s["ledgers"][0]
        assert 0 < closed["firstEntryTimestamp"] <= closed["timestamp"]
        # the ledger list in ZooKeeper: (id, entries, size, timestamps) of every ledger
        stored = decode_ml_info((await f.store.get(ml.path))[0]).ledgers
        assert [(li.ledger_id, li.entries, li.size) for li in stored] == [(ps[0].ledger_id, 3, 15), (ps[3].ledger_id, 0, 0)]
        assert stored[0].first_entry_ms == closed["firstEntryTimestamp"] and stored[0].timestamp_ms == closed["timestamp"]
        sub = s["cursors"]["sub"]
        assert sub["markDeletePosition"] == f"{ps[0].ledger_id}:-1" and sub["readPosition"] == str(ps[4])
        assert sub["individuallyDeletedMessages"] == f"[({ps[0]}..{ps[1]}], ({ps[3].ledger_id}:-1..{ps[3]}]]"
        assert sub["totalNonContiguousDeletedMessagesRange"] == 2 and sub["messagesConsumedCounter"] == 4
        assert sub["cursorLedger"] > 0 and sub["state"] == "Open" and sub["durable"] is True
        assert sub["messagesInBacklog"] == 3
        assert s["cursors"]["reader"]["durable"] is False
        assert s["cursors"]["reader"]["readPosition"] == str(ps[0]) == str(reader.read_position)


async def test_cursor_position_falls_back_to_the_node_when_bookies_fail(bookie, zk_url, ml_config) -> None:
    cfg = ml_config.replace(retention_time_minutes=-1, retention_size_mb=-1)
    async with owner(zk_url, cfg) as f:
        ml = await f.open(NAME)
        c = await ml.open_cursor("sub", "earliest")
        ps = [await ml.add_entry(b"%d" % i) for i in range(10)]
        await c.mark_delete(ps[2])
        node = decode_cursor_info((await f.store.get(c.path))[0])
        assert node.cursors_ledger_id > 0  # the position went to the cursor ledger
        bookie.kill()
        with trio.fail_after(30):
            await c.mark_delete(ps[6])  # the cursor ledger write fails: the node takes it
        node = decode_cursor_info((await f.store.get(c.path))[0])
        assert node.cursors_ledger_id == -1 and node.position is not None
        assert node.position.mark_delete == ps[6].as_tuple()
        assert c.stats()["state"] == "NoLedger"
